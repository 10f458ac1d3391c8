"""Both transports against a raw socket server on 127.0.0.1 sending malformed or truncated answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from sluice.fetch import AddressGuard, Failed, Fetched, PageFetcher
from sluice.fetch.transport import ShardedTransport, aiohttp_transport, httpx_transport
from sluice.spec import Politeness, RetryPolicy

pytestmark = pytest.mark.anyio
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok"
REPLIES = {
    "ok": OK,
    "garbage": b"HELLO WORLD\r\n\r\n",
    "bad-header": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nBad Header\r\nContent-Length: 2\r\n\r\nok",
    "bad-length": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: abc\r\n\r\nok",
    "short-body": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nok",
    "closed": b"",
}
TRANSPORTS: dict[str, Callable[[httpx.Limits], httpx.AsyncBaseTransport | None]] = {
    "default": lambda limits: None,  # PageFetcher's own wire: aiohttp without httpx
    "aiohttp": aiohttp_transport,
    "httpx": httpx_transport,
    "sharded": lambda limits: ShardedTransport.of_httpx(limits, 2),
}


@pytest.fixture
async def raw_server() -> AsyncIterator[tuple[int, list[str]]]:
    """A server answering ``GET /{key}`` with ``REPLIES[key]`` verbatim, then closing; logs the keys."""
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        for _ in range(100):
            if await reader.readline() in (b"\r\n", b""):
                break
        key = line.split()[1].decode().strip("/") if line else ""
        seen.append(key)
        writer.write(REPLIES.get(key, b""))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1]), seen


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("garbage", "protocol error"),
        ("bad-header", "protocol error"),
        ("bad-length", "protocol error"),
        ("short-body", "connection reset"),
        ("closed", "connection reset"),
    ],
)
async def test_malformed_answers_are_retryable_failures(
    raw_server: tuple[int, list[str]], transport: str, key: str, reason: str
) -> None:
    port, seen = raw_server
    spec = Politeness(obey_robots=False, retry=RetryPolicy(times=1, backoff_base_seconds=0.001))
    limits = httpx.Limits(max_connections=4)
    guard = AddressGuard(trusted=[f"127.0.0.1:{port}"])
    async with PageFetcher(spec, transport=TRANSPORTS[transport](limits), guard=guard) as fetcher:
        outcome = await fetcher.fetch(f"http://127.0.0.1:{port}/{key}")
        fine = await fetcher.fetch(f"http://127.0.0.1:{port}/ok")
    assert outcome == Failed(f"http://127.0.0.1:{port}/{key}", reason, True, None, None, 2)
    assert isinstance(fine, Fetched)
    assert seen == [key, key, "ok"]

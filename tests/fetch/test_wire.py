"""PageFetcher's default wire (aiohttp without httpx) puts the same bytes on the wire as the httpx path."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from sluice.fetch import AddressGuard, Fetched, PageFetcher, Validators
from sluice.fetch.transport import aiohttp_transport
from sluice.fetch.wire import AiohttpWire, HttpxWire
from sluice.spec import Politeness

pytestmark = pytest.mark.anyio
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\nSet-Cookie: session=1\r\n\r\nok"


@pytest.fixture
async def head_server() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A keep-alive server answering every request with ANSWER (setting a cookie); logs each request head."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b"":
            heads.append(head)
            writer.write(ANSWER)
            await writer.drain()
        writer.close()

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1]), heads


async def _heads(port: int, heads: list[bytes], transport: httpx.AsyncBaseTransport | None) -> list[bytes]:
    heads.clear()
    spec = Politeness(obey_robots=False, user_agent="SluiceTest/1.0 (+https://example.com/bot)")
    guard = AddressGuard(trusted=[f"127.0.0.1:{port}"])
    async with PageFetcher(spec, transport=transport, guard=guard) as fetcher:
        first = await fetcher.fetch(f"http://127.0.0.1:{port}/a?q=x y&r=%41", Validators('"v1"', "Tue, 01 Jan 2030"))
        second = await fetcher.fetch(f"http://127.0.0.1:{port}/b")
        assert isinstance(first, Fetched)
        assert first.body == b"ok"
        assert isinstance(second, Fetched)
        assert second.attempts == 1
    return list(heads)


async def test_default_wire_sends_the_httpx_request_head(head_server: tuple[int, list[bytes]]) -> None:
    port, heads = head_server
    direct = await _heads(port, heads, None)
    through_httpx = await _heads(port, heads, aiohttp_transport(httpx.Limits(max_connections=4)))
    assert direct == through_httpx
    assert (
        direct[0]
        == (
            b"GET /a?q=x%20y&r=A HTTP/1.1\r\n"  # yarl, under both paths, unquotes %41
            + f"host: 127.0.0.1:{port}\r\n".encode()
            + b"accept: */*\r\nconnection: keep-alive\r\nuser-agent: SluiceTest/1.0 (+https://example.com/bot)\r\n"
            b'accept-encoding: gzip, deflate\r\nif-none-match: "v1"\r\nif-modified-since: Tue, 01 Jan 2030\r\n\r\n'
        )
    )
    assert b"cookie" not in direct[1].lower()  # the Set-Cookie of the first answer is not sent back


async def test_wire_choice() -> None:
    spec = Politeness(obey_robots=False)
    async with PageFetcher(spec) as default:
        assert isinstance(default._connection(), AiohttpWire)
    async with PageFetcher(spec, transport=aiohttp_transport(httpx.Limits(max_connections=2))) as injected:
        assert isinstance(injected._connection(), HttpxWire)
    unused = PageFetcher(spec)
    await unused.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        unused._connection()

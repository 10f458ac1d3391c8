"""Throughput/CPU benchmark of the fetch path against a local aiohttp server in another process.

    PYTHONPATH=functions .venv/bin/python tests/fetch/bench_fetch.py [--requests 2000] [--inflight 128]

The server answers every GET after --latency-ms with a --body-kb HTML page; the ceiling is
inflight / latency pages per second. CPU-ms per request is time.process_time() of the client only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import httpx

from sluice.fetch import AddressGuard, Fetched, PageFetcher
from sluice.fetch.transport import ShardedTransport, aiohttp_transport, httpx_transport
from sluice.spec import Politeness


def serve(port: int, latency_s: float, body_kb: int) -> None:
    """Run the throwaway server (in the child process)."""
    from aiohttp import web

    body = (b"<p>" + b"x" * 1017 + b"</p>\n") * body_kb

    async def page(request: web.Request) -> web.Response:
        await asyncio.sleep(latency_s)
        return web.Response(body=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=1024)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(latency_s: float, body_kb: int) -> Iterator[int]:
    """A server process on a free port, stopped on exit."""
    port = _free_port()
    args = [
        sys.executable,
        __file__,
        "--serve",
        str(port),
        "--latency-ms",
        str(latency_s * 1000),
        "--body-kb",
        str(body_kb),
    ]
    child = subprocess.Popen(args)  # noqa: S603 - our own script
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.05)  # a real socket: the server is another process, which no test clock moves
        yield port
    finally:
        child.terminate()
        child.wait(10)


async def run_fetcher(
    port: int,
    n: int,
    inflight: int,
    make: Callable[[httpx.Limits], httpx.AsyncBaseTransport] | None,
    robots: bool = False,
) -> tuple[float, float, int]:
    """(pages/s, client CPU ms per request, pages fetched) through PageFetcher (``make`` None: its default)."""
    politeness = Politeness(concurrency=inflight, concurrency_per_domain=inflight, obey_robots=robots)
    limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    guard = AddressGuard(trusted=[f"127.0.0.1:{port}"])
    transport = make(limits) if make is not None else None
    async with PageFetcher(politeness, transport=transport, guard=guard) as fetcher:
        warm = [(f"http://127.0.0.1:{port}/w{i}", None) for i in range(inflight)]
        async for _ in fetcher.fetch_many(warm):
            pass
        urls = [(f"http://127.0.0.1:{port}/p{i}", None) for i in range(n)]
        cpu, wall, ok = time.process_time(), time.perf_counter(), 0
        async for outcome in fetcher.fetch_many(urls):
            ok += isinstance(outcome, Fetched)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu * 1000 / n, ok


async def run_plain_httpx(port: int, n: int, inflight: int) -> tuple[float, float, int]:
    """The reference: a bare httpx.AsyncClient with a semaphore, no fetch-layer logic."""
    limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    async with httpx.AsyncClient(limits=limits) as client:
        sem = asyncio.Semaphore(inflight)

        async def one(i: int) -> bool:
            async with sem:
                return (await client.get(f"http://127.0.0.1:{port}/p{i}")).status_code == 200

        await asyncio.gather(*(one(i) for i in range(inflight)))
        cpu, wall = time.process_time(), time.perf_counter()
        ok = sum(await asyncio.gather(*(one(i) for i in range(n))))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu * 1000 / n, ok


async def run_plain_aiohttp(port: int, n: int, inflight: int) -> tuple[float, float, int]:
    """The floor: a bare aiohttp session with a semaphore (no httpx, no fetch-layer logic)."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=inflight)) as session:
        sem = asyncio.Semaphore(inflight)

        async def one(i: int) -> bool:
            async with sem, session.get(f"http://127.0.0.1:{port}/p{i}") as response:
                await response.read()
                return response.status == 200

        await asyncio.gather(*(one(i) for i in range(inflight)))
        cpu, wall = time.process_time(), time.perf_counter()
        ok = sum(await asyncio.gather(*(one(i) for i in range(n))))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu * 1000 / n, ok


def main() -> None:
    """Parse arguments; serve, or benchmark every transport."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=int)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--inflight", type=int, default=128)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--body-kb", type=int, default=50)
    parser.add_argument("--only", default="")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--robots", action="store_true", help="obey robots.txt (the server answers it with a page)")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    if args.serve:
        serve(args.serve, latency, args.body_kb)
        return
    Job = Callable[[int], Coroutine[Any, Any, tuple[float, float, int]]]
    n, inflight, robots = args.requests, args.inflight, args.robots
    candidates: dict[str, Job] = {
        "plain httpx client (reference)": lambda port: run_plain_httpx(port, n, inflight),
        "plain aiohttp client (reference)": lambda port: run_plain_aiohttp(port, n, inflight),
        "PageFetcher + httpx transport": lambda port: run_fetcher(port, n, inflight, httpx_transport, robots),
        f"PageFetcher + httpx sharded x{args.shards}": lambda port: run_fetcher(
            port, n, inflight, lambda lim: ShardedTransport.of_httpx(lim, args.shards), robots
        ),
        "PageFetcher + aiohttp transport": lambda port: run_fetcher(port, n, inflight, aiohttp_transport, robots),
        "PageFetcher default (aiohttp+guard)": lambda port: run_fetcher(port, n, inflight, None, robots),
    }
    ceiling = args.inflight / latency
    out = sys.stdout
    out.write(
        f"{args.requests} requests, {args.inflight} in flight, {args.latency_ms:g} ms latency, "
        f"{args.body_kb} KB body; ceiling {ceiling:.0f} pages/s\n"
    )
    for name, job in candidates.items():
        if args.only and args.only not in name:
            continue
        with server(latency, args.body_kb) as port:
            rate, cpu_ms, ok = asyncio.run(job(port))
        out.write(
            f"{name:34s} {rate:7.0f} pages/s ({rate / ceiling:4.0%} of ceiling)  "
            f"{cpu_ms:5.2f} CPU-ms/request  ok={ok}\n"
        )
        out.flush()


if __name__ == "__main__":
    main()

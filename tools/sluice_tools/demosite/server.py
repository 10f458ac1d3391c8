"""DemoSite: the catalogue, fault injection and test endpoints served on 127.0.0.1.

Server choice: a hand-written asyncio.Protocol HTTP/1.1 keep-alive server (protocol.py) beat
aiohttp's low-level server (aiohttp.web.Server serving the same cached bytes) about 4x.
Measured on the 2-core dev machine, server pinned to core 0, wrk pinned to core 1, 50 KB page:

    taskset -c 0 python -m sluice_tools.demosite --port 8765 [--latency-ms 50]
    taskset -c 1 wrk -t1 -c128 -d10s --latency http://127.0.0.1:8765/catalogue/page-1.html

    asyncio.Protocol, 128 conns:            27,800 req/s (1.3 GB/s), p50 3.6 ms, p99 12 ms
      (8,000-22,000 req/s while other test suites shared the cores)
    same with -H 'Accept-Encoding: gzip':   25,700-34,000 req/s
    aiohttp low-level server, 128 conns:     7,200 req/s, p50 18 ms, p99 34 ms
    --latency-ms 50, 128 conns:              2,380 req/s, p50 53 ms (ceiling 128 / 0.05 s = 2,560)
    --latency-ms 50, 256 conns:              4,650 req/s, p50 54 ms, p99 64 ms (server ~30% CPU)
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections import Counter
from collections.abc import Awaitable

from . import faults, routes
from .catalogue import Catalogue
from .config import DemoSiteConfig
from .http1 import Request, Response, Result, Streamed
from .protocol import HttpProtocol
from .stats import DemoStats
from .testroutes import FixedEndpoints


def is_loopback(host: str) -> bool:
    """True for 'localhost' (and names under it) and loopback IP literals."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class DemoSite:
    """A deterministic catalogue web site with fault injection, for tests and benchmarks."""

    def __init__(self, config: DemoSiteConfig | None = None, catalogue: Catalogue | None = None) -> None:
        self.config = config or DemoSiteConfig()
        self.catalogue = catalogue or Catalogue()
        self.stats = DemoStats(self.config.log_limit)
        self.host = "127.0.0.1"
        self.port = 0
        self._fixed = FixedEndpoints()
        self._attempts: Counter[str] = Counter()
        self._seqs: dict[int, int] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[HttpProtocol] = set()

    @property
    def base_url(self) -> str:
        """e.g. `http://127.0.0.1:8123` (no trailing slash); only valid after start()."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on host:port (loopback only; port 0 picks a free one); returns the port."""
        if not is_loopback(host):
            raise ValueError(f"demo site only binds loopback addresses, not {host!r}")
        host = "127.0.0.1" if host == "localhost" else host
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: HttpProtocol(self, self._connections), host, port, backlog=1024)
        self.host = host
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening and abort open connections (in-flight requests are cut)."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self._connections):
            connection.close()
        await asyncio.wait_for(self._server.wait_closed(), 5)
        for _ in range(3):
            await asyncio.sleep(0)
        self._server = None

    def reset(self) -> None:
        """Clear stats, fault attempt counters and per-key test endpoint state (thread-safe)."""
        self.stats.reset()
        self._fixed.reset()
        self._attempts = Counter()

    def set_config(self, config: DemoSiteConfig) -> None:
        """Swap the config; requests already running keep the old one (thread-safe)."""
        self.config = config

    def set_catalogue(self, catalogue: Catalogue) -> None:
        """Swap the content, e.g. a new version or a broken selector (thread-safe)."""
        self.catalogue = catalogue

    def handle(self, request: Request) -> Result | Awaitable[Result]:
        """Entry point from the protocol for every request."""
        if request.path.startswith("/_demo/"):
            return self._demo(request)
        self._seqs[id(request)] = self.stats.begin(request)
        config = self.config
        if config.ban_after is not None and self.stats.total > config.ban_after:
            return faults.error_page(403, "Forbidden: this crawler is blocked")
        latency = config.latency_ms
        if config.latency_per_request_ms > 0:
            beyond = self.stats.in_flight_of(request.host) - config.latency_knee
            latency += config.latency_per_request_ms * max(0, beyond)
        if latency > 0:
            return self._delayed(request, config, latency)
        return self._route(request, config)

    def connected(self) -> None:
        """A connection opened, counted in the stats."""
        self.stats.transferred(0, 0, connection=True)

    def transferred(self, received: int, sent: int) -> None:
        """Bytes the protocol read or wrote on a connection, counted in the stats."""
        self.stats.transferred(received, sent)

    def finished(self, request: Request, status: int) -> None:
        """Called by the protocol once the answer was written or the connection dropped."""
        seq = self._seqs.pop(id(request), None)
        if seq is not None:
            self.stats.end(request, seq, status)

    async def _delayed(self, request: Request, config: DemoSiteConfig, latency_ms: float) -> Result:
        await asyncio.sleep(latency_ms / 1000)
        result = self._route(request, config)
        return result if isinstance(result, Response | Streamed) else await result

    def _route(self, request: Request, config: DemoSiteConfig) -> Result | Awaitable[Result]:
        path = request.path
        if path.startswith("/_test/"):
            return self._fixed.handle(request)
        normal = routes.content(request, self.catalogue, config)
        if path.startswith(routes.NOT_CONTENT):
            return normal
        attempts = self._attempts
        attempt = attempts[path]
        attempts[path] = attempt + 1
        fault = faults.choose(config, path, attempt)
        return normal if fault is faults.Fault.NONE else faults.apply(fault, config, normal)

    def _demo(self, request: Request) -> Response:
        if request.path == "/_demo/stats":
            data = self.stats.snapshot(with_log=request.query.get("log", "1") != "0")
        elif request.path == "/_demo/reset":
            self.reset()
            data = {"reset": True}
        else:
            return faults.error_page(404, "Unknown demo endpoint.")
        return Response(200, [("Content-Type", "application/json")], json.dumps(data).encode())

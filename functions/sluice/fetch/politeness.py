"""Per-domain concurrency and spacing of request starts, plus the global in-flight cap."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class _Domain:
    __slots__ = ("last_start", "lock", "slots", "users")

    def __init__(self, limit: int) -> None:
        self.slots = asyncio.Semaphore(limit)
        self.lock = asyncio.Lock()
        self.last_start = float("-inf")
        self.users = 0


class DomainGate:
    """Admits a request when its domain has a free slot, the domain's delay since the last
    start has passed, and a global slot is free; the global slot is taken only after the wait.

    The delay runs from the later of a request's admission and its :meth:`touch` (answer begun),
    so local scheduling jitter can never bring two starts closer than the delay at the server.
    """

    def __init__(self, concurrency: int, per_domain: int, min_delay_s: float = 0.0) -> None:
        self.concurrency = concurrency
        self.per_domain = per_domain
        self.min_delay_s = min_delay_s
        self._global = asyncio.Semaphore(concurrency)
        self._domains: dict[str, _Domain] = {}
        self._sweep_at = 1024
        self.in_flight = 0
        self.max_in_flight = 0

    @asynccontextmanager
    async def slot(self, domain: str, delay_s: float | None = None) -> AsyncIterator[None]:
        """Hold one request slot for ``domain``; ``delay_s`` raises the spacing (Crawl-delay)."""
        delay = max(self.min_delay_s, delay_s or 0.0)
        state = self._domain(domain)
        state.users += 1
        try:
            async with state.slots:
                if delay > 0:
                    async with state.lock:
                        # a touch may move last_start on while we sleep, once per request in flight at most
                        for _ in range(self.per_domain + 1):
                            wait = state.last_start + delay - time.monotonic()
                            if wait <= 0:
                                break
                            await asyncio.sleep(wait)
                        await self._global.acquire()
                        state.last_start = time.monotonic()
                else:
                    await self._global.acquire()
                    state.last_start = time.monotonic()
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    yield
                finally:
                    self.in_flight -= 1
                    self._global.release()
        finally:
            state.users -= 1

    def touch(self, domain: str) -> None:
        """Note that the request holding a slot of ``domain`` has surely reached the server (its answer began)."""
        state = self._domains.get(domain)
        if state is not None:
            state.last_start = max(state.last_start, time.monotonic())

    def _domain(self, domain: str) -> _Domain:
        state = self._domains.get(domain)
        if state is None:
            if len(self._domains) >= self._sweep_at:
                self._sweep()
            state = self._domains[domain] = _Domain(self.per_domain)
        return state

    def _sweep(self) -> None:
        """Forget idle domains whose spacing has run out (amortised: the threshold doubles)."""
        now = time.monotonic()
        horizon = max(self.min_delay_s, 300.0)
        for key in [k for k, d in self._domains.items() if d.users == 0 and now - d.last_start > horizon]:
            del self._domains[key]
        self._sweep_at = max(1024, 2 * len(self._domains))

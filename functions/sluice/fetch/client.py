"""PageFetcher: polite, safe, bounded HTTP fetching that turns every page into a typed outcome.

Default transport, by measurement (``tests/fetch/bench_fetch.py``: 2,000 GETs, 128 in flight, 50 ms
server latency, 50 KB pages, aiohttp server in another process, 2 vCPUs; ceiling 2,560 pages/s;
best quiet run, client CPU per page from time.process_time):
httpx's own pool 89 pages/s (3%), 11 CPU-ms (its pool bookkeeping; a bare httpx client: 108, 9.3 ms);
8 sharded httpx pools 520 (20%), 1.8 ms; httpx over aiohttp (httpx-aiohttp) 1,969-2,044 (77-80%),
0.43-0.45 ms, robots.txt on or off alike; a bare aiohttp client 2,254 (88%), 0.16 ms.
So the default is aiohttp, with connect-time address checks; given no ``transport=``, PageFetcher
skips httpx too and speaks to the aiohttp pool directly (:class:`~sluice.fetch.wire.AiohttpWire`,
same request head, same errors): engine A/B (bench.client_sluice, 2,000 pages, 50 ms latency, busy
2-vCPU machine) 2.05-2.13 -> 1.69-1.72 CPU-ms/page at 8 in flight, 1.66-1.86 -> 1.30-1.51 at 32,
1.57 -> 1.33-1.52 at 128 (within noise there). An injected httpx transport goes through httpx.
On a busy machine all pages/s figures fall (aiohttp path 1,150-1,550) while CPU-ms/page holds.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.egress import POOL_EMPTY
from sluice.domain.hosts import host_key, pause_refused
from sluice.extraction.urls import resolve_link
from sluice.spec import Politeness

from .credentials import RequestCredentials
from .errors import DeferredFetchError, PermanentFetchError, RetryableFetchError, SkipFetch, translate
from .outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
from .politeness import HostBlocked, HostGate, HostPaused
from .proxies import PROXY_AUTH_REQUIRED, PoolProxy, ProxyPool, Route, proxy_failure
from .retry import RetryRules, parse_retry_after
from .robots import ROBOTS_MAX_BYTES, RobotsCache, RobotsResponse, RobotsStore
from .safety import AddressGuard
from .target import parse_target, target_host
from .throttle import LoopLag

if TYPE_CHECKING:
    import httpx

    from .wire import Reply, Wire

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
MARKER_SCAN_BYTES = 256 * 1024
"""A block page says so early: markers are looked for in a page's first 256 KB."""


@dataclass
class FetchStats:
    """Counters for tests and benchmarks."""

    requests: int = 0
    """HTTP requests sent, robots.txt and redirect hops included."""
    retries: int = 0
    redirects: int = 0
    robots_fetches: int = 0
    bytes_raw: int = 0
    """Body bytes as received (still compressed)."""
    bytes_body: int = 0
    """Body bytes after content decoding."""
    in_flight: int = 0
    max_in_flight: int = 0


@dataclass(frozen=True, slots=True)
class _Answer:
    final_url: str
    status: int
    headers: Mapping[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes


class PageFetcher:
    """Fetches pages per a spec's :class:`Politeness`; see the module docstring for the transport choice.

    The fetcher owns its transport (closed by :meth:`aclose`) and keeps no cookies. ``credentials``
    (the spec's ``request`` section, resolved) add headers to every request, credentials only to the
    origins the spec names (robots.txt and redirects included), and route every request through the
    proxy, if one is given. ``clock`` is the pipeline's time: a Retry-After date is read against it, and the
    fleet's host states are written in it.
    """

    def __init__(
        self,
        politeness: Politeness,
        *,
        allow_loopback: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        guard: AddressGuard | None = None,
        rng: random.Random | None = None,
        robots_store: RobotsStore | None = None,
        credentials: RequestCredentials | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if transport is not None and credentials is not None and (credentials.proxy or credentials.proxies):
            raise ValueError("a proxy needs the fetcher's own transport (an injected transport has its own routing)")
        self.politeness = politeness
        self.credentials = credentials
        self.proxies = credentials.proxies if credentials is not None else None
        """The spec's proxy pool (``request.proxies``), if any: each request's route, tiers, health."""
        self.robots_store = robots_store
        """Where robots.txt answers are shared with the run's other fetchers (None: this fetcher alone)."""
        self.guard = guard if guard is not None else AddressGuard(allow_loopback)
        self.rules = RetryRules.from_policy(politeness.retry)
        self.gate = HostGate(
            politeness.concurrency,
            politeness.concurrency_per_domain,
            politeness.min_delay_seconds,
            adaptive=politeness.adaptive,
            breaker=politeness.breaker,
            clock=clock,
        )
        self._markers = (
            [(m, m.lower().encode()) for m in politeness.breaker.markers] if politeness.breaker.enabled else []
        )
        self.robots = RobotsCache(self._load_robots)
        self.stats = FetchStats()
        self.lag = LoopLag()
        """How late this fetcher's loop runs: taken off each latency the throttle judges."""
        self._accepted = frozenset(t.strip().lower() for t in politeness.content_types)
        self._transport = transport
        self._rng = rng or random.Random()  # noqa: S311 - jitter only
        self._wire: Wire | None = None
        self._closed = False

    async def __aenter__(self) -> PageFetcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool; the fetcher cannot be used afterwards."""
        self._closed = True
        self.lag.stop()
        await self.robots.aclose()
        if self._wire is not None:
            await self._wire.aclose()
        elif self._transport is not None:
            await self._transport.aclose()

    def _connection(self) -> Wire:
        """The wire, made on the first request: aiohttp (about 100 ms of imports, and the verified SSL
        context it builds at import) is loaded then, not when the fetcher's module is (the cold start)."""
        if self._wire is None:
            if self._closed:
                raise RuntimeError("PageFetcher is closed")
            import httpx

            from .transport import guarded_session
            from .wire import AiohttpWire, HttpxWire

            spec = self.politeness
            if self._transport is not None:
                self._wire = HttpxWire(self._transport, spec.user_agent, spec.timeout_seconds)
            else:
                n = spec.concurrency
                limits = httpx.Limits(max_connections=n, max_keepalive_connections=n, keepalive_expiry=30.0)
                guard = self.guard
                proxy = self.credentials.proxy if self.credentials is not None else None
                self._wire = AiohttpWire(
                    lambda: guarded_session(limits, guard), spec.user_agent, spec.timeout_seconds, proxy=proxy
                )
        return self._wire

    async def fetch(
        self,
        url: str,
        validators: Validators | None = None,
        *,
        max_attempts: int | None = None,
        retry_sleep_cap: float | None = None,
    ) -> FetchOutcome:
        """Fetch one page; failures are outcomes, never exceptions.

        ``max_attempts`` overrides ``retry.times + 1``; a wait longer than ``retry_sleep_cap``
        is not slept but returned as ``Failed(retryable=True, retry_after_s=wait)``.
        """
        started = time.monotonic()
        got = await self._with_retries(url, validators, False, max_attempts, retry_sleep_cap)
        if isinstance(got, Failed | Skipped):
            return got
        answer, attempts = got
        elapsed = time.monotonic() - started
        if answer.status == 304:
            fresh = Validators.from_headers(answer.headers).or_else(validators)
            return NotModified(url, answer.final_url, fresh, attempts, elapsed)
        if not 200 <= answer.status < 300:
            return Failed(url, f"http {answer.status}", False, answer.status, None, attempts)
        marker = self._block_marker(answer.body)
        if marker is not None:
            why = f"block marker {marker!r} in the page"
            host = host_key(answer.final_url)
            if self.proxies is not None and self.proxies.escalate(host) is not None:
                # The next tier asks again (bounded: a host only moves up, through the pool's few tiers).
                return await self.fetch(url, validators, max_attempts=max_attempts, retry_sleep_cap=retry_sleep_cap)
            self.gate.refused(host, why)
            return Failed(url, why, False, answer.status, None, attempts)
        content_type = answer.headers.get("content-type") or "text/html"
        fresh = Validators.from_headers(answer.headers)
        return Fetched(url, answer.final_url, answer.status, content_type, answer.body, fresh, attempts, elapsed)

    def _block_marker(self, body: bytes) -> str | None:
        """The first of the spec's block markers the page holds (case-insensitive), if any."""
        if not self._markers:
            return None
        folded = body[:MARKER_SCAN_BYTES].lower()
        return next((text for text, needle in self._markers if needle in folded), None)

    async def fetch_many(
        self,
        requests: Iterable[tuple[str, Validators | None]],
        *,
        max_attempts: int | None = None,
        retry_sleep_cap: float | None = None,
    ) -> AsyncIterator[FetchOutcome]:
        """Yield outcomes as they complete, with at most ``concurrency`` fetches under way."""
        source = iter(requests)
        pending: set[asyncio.Task[FetchOutcome]] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self.politeness.concurrency:
                    item = next(source, None)
                    if item is None:
                        exhausted = True
                        break
                    url, validators = item
                    pending.add(
                        asyncio.create_task(
                            self.fetch(url, validators, max_attempts=max_attempts, retry_sleep_cap=retry_sleep_cap)
                        )
                    )
                if not pending:
                    return
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    yield task.result()
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def _with_retries(
        self,
        url: str,
        validators: Validators | None,
        robots_mode: bool,
        max_attempts: int | None,
        sleep_cap: float | None,
    ) -> tuple[_Answer, int] | Failed | Skipped:
        rules = self.rules
        limit = max(1, max_attempts if max_attempts is not None else rules.times + 1)
        after_cap = rules.retry_after_max_s if sleep_cap is None else min(rules.retry_after_max_s, sleep_cap)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(url, validators, robots_mode, sleep_cap), attempt
            except SkipFetch as exc:
                return Skipped(url, exc.reason)
            except PermanentFetchError as exc:
                return Failed(url, exc.reason, False, exc.status, None, attempt)
            except DeferredFetchError as exc:
                return Failed(url, exc.reason, True, exc.status, exc.retry_after_s, attempt)
            except RetryableFetchError as exc:
                error = exc
            if error.retry_after_s is not None and error.retry_after_s > self.gate.pause_cap_s:
                # The gate blocked the host for the run on this answer: the page says so now, not after a wait.
                return Skipped(url, pause_refused(host_key(url), error.retry_after_s, self.gate.pause_cap_s))
            if attempt >= limit:
                return Failed(url, error.reason, True, error.status, error.retry_after_s, attempt)
            if error.retry_after_s is not None:
                wait = error.retry_after_s
                if wait > after_cap:
                    why = f"{error.reason} (Retry-After {wait:g}s over the {after_cap:g}s cap)"
                    return Failed(url, why, True, error.status, wait, attempt)
            else:
                wait = rules.delay(attempt - 1, self._rng)
                if sleep_cap is not None and wait > sleep_cap:
                    return Failed(url, error.reason, True, error.status, wait, attempt)
            self.stats.retries += 1
            await asyncio.sleep(wait)

    async def _attempt(
        self, url: str, validators: Validators | None, robots_mode: bool, max_wait_s: float | None = None
    ) -> _Answer:
        """One attempt: every redirect hop is address-checked, robots-checked and gated."""
        import httpx  # loaded by the first request (parse_target), never by the module's import

        try:
            target = _without_credentials(parse_target(url))
        except httpx.InvalidURL as exc:
            raise PermanentFetchError("invalid URL") from exc
        headers = validators.request_headers() if validators is not None and not robots_mode else {}
        agent = self.politeness.user_agent
        credentials = self.credentials
        if credentials is not None and credentials.proxy is not None:
            refusal = await self.guard.check(credentials.proxy.url)
            if refusal is not None:
                raise SkipFetch(f"proxy refused: {refusal}")
        carry = True  # credentials go while the chain stays on the spec's origins, and never again once it left
        previous: httpx.URL | None = None
        for hop in range(self.politeness.max_redirects + 1):
            refusal = await self.guard.check(target)
            if refusal is not None:
                raise SkipFetch(refusal if hop == 0 else f"redirect to {target} refused: {refusal}")
            sent = headers
            if credentials is not None:
                carry = carry and credentials.may_carry(target, previous)
                sent = {**credentials.headers(with_credentials=carry), **headers}
            delay = None
            if self.politeness.obey_robots and not robots_mode:
                refusal = await self.robots.check(target, agent)
                if refusal is not None:
                    raise SkipFetch(refusal if hop == 0 else f"redirect to {target}: {refusal}")
                delay = self.robots.crawl_delay(target, agent)
            host = target_host(target)
            try:
                async with self.gate.slot(host, delay, max_wait_s=max_wait_s):
                    result = await self._exchange(target, host, sent, robots_mode, url)
            except HostBlocked as exc:
                tier = self.proxies.escalate(host) if self.proxies is not None else None
                if tier is not None:  # the breaker tripped on this tier: the host moves up, its count afresh
                    self.gate.reprieve(host)
                    raise RetryableFetchError(f"{exc}; escalated to proxy tier {tier}") from exc
                raise SkipFetch(str(exc)) from exc
            except HostPaused as exc:
                raise DeferredFetchError(str(exc), retry_after_s=exc.wait_s) from exc
            if isinstance(result, _Answer):
                return result
            self.stats.redirects += 1
            previous, target = target, result
        raise PermanentFetchError(f"too many redirects ({self.politeness.max_redirects + 1})")

    async def _exchange(
        self, target: httpx.URL, domain: str, headers: dict[str, str], robots_mode: bool, page: str
    ) -> _Answer | httpx.URL:
        """Send one request (for ``page``, the URL asked for); returns the answer, or the next URL of a redirect.

        One coroutine sends, judges the head (:meth:`_head`, plain code) and reads the body: the per-page
        path keeps its awaits to the wire's own (a proxy pool's choice of route alone has its own, :meth:`_send`)."""
        import httpx

        wire = self._connection()
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            async with asyncio.timeout(self.politeness.timeout_seconds):
                self.lag.start()
                sent = time.monotonic()
                pool = self.proxies
                if pool is None:
                    reply, via = await wire.send(target, headers), None
                else:
                    reply, via = await self._send(wire, pool, target, headers, page)
                self.gate.touch(domain)
                if via is not None and pool is not None and pool.answered(page, via, reply.status):
                    await reply.aclose()  # a 403 another proxy may not give: not the host's refusal (yet)
                    raise RetryableFetchError(f"http 403 through proxy {via.name}", status=403)
                lag = self.lag.since(sent + self.gate.latency_floor_s(domain))
                after = self._answered(domain, reply, time.monotonic() - sent, lag)
                try:
                    cap = ROBOTS_MAX_BYTES if robots_mode else self.politeness.max_body_bytes
                    said, settled = self._head(target, reply.status, reply.raw_headers, robots_mode, after, cap)
                    if settled is not None:
                        return settled
                    encoding = said.get("content-encoding", "")
                    body = await reply.read(encoding, cap, truncate=robots_mode, on_raw=self._count_raw)
                    stats.bytes_body += len(body)
                    return _Answer(str(target), reply.status, said, body)
                finally:
                    await reply.aclose()
        except TimeoutError as exc:
            raise RetryableFetchError("timeout") from exc
        except httpx.HTTPError as exc:
            raise translate(exc) from exc
        finally:
            stats.in_flight -= 1

    async def _send(
        self, wire: Wire, pool: ProxyPool, target: httpx.URL, headers: dict[str, str], page: str
    ) -> tuple[Reply, PoolProxy]:
        """Put the request on the wire through ``pool``'s proxy for the host.

        A proxy that cannot be reached, is refused by the address guard, or answers 407 is ejected
        and the next one carries the request at once (the site was not reached); with none left the
        page fails (:data:`~sluice.domain.egress.POOL_EMPTY`)."""
        import httpx

        host = target_host(target)
        for _ in range(len(pool.proxies)):
            chosen = pool.choose(host, page)
            if chosen is None:
                break
            refusal = await self.guard.check(chosen.proxy.url)
            if refusal is not None:
                pool.failed(page, chosen, f"address refused: {refusal}")
                continue
            try:
                reply = await wire.send(target, headers, via=chosen.proxy)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as exc:
                pool.failed(page, chosen, proxy_failure(exc))
                continue
            if reply.status == PROXY_AUTH_REQUIRED:
                await reply.aclose()
                pool.failed(page, chosen, "407 proxy authentication required")
                continue
            return reply, chosen
        raise PermanentFetchError(POOL_EMPTY)

    def _answered(self, host: str, reply: Reply, latency_s: float, lag_s: float) -> float | None:
        """Tell the gate what the host answered and how fast (the throttle and the breaker live on it;
        ``lag_s``: how late our own loop ran meanwhile, not the host's doing);
        the answer's Retry-After, if it is one that can carry it."""
        after = None
        if reply.status in (429, 503) or self.rules.should_retry(reply.status):
            values = [v for k, v in reply.raw_headers if k.lower() == b"retry-after"]  # the last one counts
            after = parse_retry_after(values[-1].decode("latin-1") if values else None, self.gate.clock())
        after_s = after if reply.status in (429, 503) else None
        self.gate.answered(host, reply.status, latency_s, retry_after_s=after_s, lag_s=lag_s)
        return after

    def _head(
        self,
        target: httpx.URL,
        status: int,
        raw_headers: Iterable[tuple[bytes, bytes]],
        robots_mode: bool,
        retry_after_s: float | None,
        cap: int,
    ) -> tuple[dict[str, str], _Answer | httpx.URL | None]:
        """What an answer's head settles: its headers (lower-cased names, the last of a repeated one), and the
        next URL of a redirect, an answer with no body to read (not a 2xx), or None: the body is to be read
        (under ``cap``). A status to retry, a refused content type or a Content-Length over ``cap`` raise."""
        import httpx

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
        location = headers.get("location")
        if status in _REDIRECTS and location:
            # Resolved as a browser resolves it; credentials a site puts in a Location are never sent.
            next_url = resolve_link(location, str(target))
            if next_url is None:
                raise PermanentFetchError(f"bad redirect location {location[:200]!r}")
            try:
                return headers, _without_credentials(parse_target(next_url))
            except httpx.InvalidURL as exc:
                raise PermanentFetchError(f"bad redirect location {location[:200]!r}") from exc
        if self.rules.should_retry(status):
            raise RetryableFetchError(f"http {status}", status=status, retry_after_s=retry_after_s)
        if not 200 <= status < 300:
            return headers, _Answer(str(target), status, headers, b"")
        if not robots_mode:
            self._gate_content(headers)
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > cap:
                raise PermanentFetchError(f"body over {cap} bytes")
        return headers, None

    def _count_raw(self, size: int) -> None:
        self.stats.bytes_raw += size

    def _gate_content(self, headers: Mapping[str, str]) -> None:
        media = (headers.get("content-type") or "text/html").split(";", 1)[0].strip().lower() or "text/html"
        if media in self._accepted or f"{media.split('/', 1)[0]}/*" in self._accepted or "*/*" in self._accepted:
            return
        raise SkipFetch(f"content-type {media} not accepted")

    async def _load_robots(self, url: str) -> RobotsResponse:
        store = self.robots_store
        if store is not None:
            shared = await store.get(url)
            if shared is not None:
                return shared
        answer = await self._fetch_robots(url)
        if store is not None:
            await store.put(url, answer)
        return answer

    async def _fetch_robots(self, url: str) -> RobotsResponse:
        self.stats.robots_fetches += 1
        # A host paused for longer than a request's timeout is not waited for here, silently: robots.txt is
        # unreachable for now, and the page goes back to the queue with the reason.
        got = await self._with_retries(url, None, True, None, self.politeness.timeout_seconds)
        if self.proxies is not None:  # robots.txt has no result of its own: the next page's reports its failures
            self.proxies.drop_route(url)
        if isinstance(got, Skipped):
            return RobotsResponse(None, error=got.reason, permanent=True)
        if isinstance(got, Failed):
            return RobotsResponse(None, error=got.reason, permanent=not got.retryable)
        answer, _ = got
        return RobotsResponse(answer.status, answer.body)

    def route(self, url: str) -> Route | None:
        """What ``url``'s fetch went through with a proxy pool (None without one), forgotten once asked."""
        return self.proxies.take_route(url) if self.proxies is not None else None


def _without_credentials(url: httpx.URL) -> httpx.URL:
    """``url`` with no user name or password: a URL's credentials would be sent as Basic auth."""
    return url.copy_with(userinfo=b"") if url.userinfo else url

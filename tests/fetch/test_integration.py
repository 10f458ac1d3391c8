"""The fetcher against the demo site over real sockets on 127.0.0.1 (both transports where it matters)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from sluice.fetch import AddressGuard, Failed, Fetched, NotModified, PageFetcher, Skipped
from sluice.fetch.transport import aiohttp_transport, httpx_transport
from sluice.spec import Politeness, RetryPolicy
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.demosite.stats import RequestRecord

pytestmark = pytest.mark.anyio
MB = 1024 * 1024
TRANSPORTS: dict[str, Callable[[httpx.Limits], httpx.AsyncBaseTransport | None]] = {
    "default": lambda limits: None,  # PageFetcher's own wire: aiohttp without httpx
    "aiohttp": aiohttp_transport,
    "httpx": httpx_transport,
}
Make = Callable[..., PageFetcher]


@pytest.fixture(scope="module")
def demo() -> Iterator[RunningDemoSite]:
    """One demo site for the module (each test resets it)."""
    with running_demo_site(books=100) as running:
        yield running


@pytest.fixture
def site(demo: RunningDemoSite) -> RunningDemoSite:
    """The shared site with fresh stats and fault counters."""
    demo.reset()
    return demo


async def logged(site: RunningDemoSite, path: str, expected: int) -> list[RequestRecord]:
    """The site's log of ``path``, once it holds ``expected`` rows (it logs a request when it ends,
    which can be just after the client has the answer); waits at most about two seconds."""
    for _ in range(200):
        records = site.stats.records(path)
        if len(records) >= expected:
            return records
        await asyncio.sleep(0.01)  # a real socket: the server logs the request after the client has it
    return site.stats.records(path)


def politeness(**overrides: Any) -> Politeness:
    """Millisecond backoffs, robots off unless asked."""
    retry = overrides.pop("retry", None) or RetryPolicy(
        times=2, backoff_base_seconds=0.001, backoff_max_seconds=0.005, retry_after_max_seconds=5
    )
    values: dict[str, Any] = {"obey_robots": False, "timeout_seconds": 5, "retry": retry}
    values.update(overrides)
    return Politeness(**values)


@pytest.fixture(params=sorted(TRANSPORTS))
def transport_name(request: pytest.FixtureRequest) -> str:
    """Run a test on every transport (the default wire included)."""
    return str(request.param)


def make_fetcher(transport: str = "default", guard: AddressGuard | None = None, **overrides: Any) -> PageFetcher:
    """A fetcher allowed onto loopback (the demo site) unless a stricter guard is given."""
    spec = politeness(**overrides)
    limits = httpx.Limits(max_connections=spec.concurrency, max_keepalive_connections=spec.concurrency)
    return PageFetcher(spec, transport=TRANSPORTS[transport](limits), guard=guard or AddressGuard(allow_loopback=True))


async def test_flaky_503_then_success(site: RunningDemoSite, transport_name: str) -> None:
    async with make_fetcher(transport_name) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/flaky/a-{transport_name}?fail=2&status=503")
        assert fetcher.stats.retries == 2
    assert isinstance(outcome, Fetched)
    assert outcome.attempts == 3
    assert site.stats.count(f"/_test/flaky/a-{transport_name}") == 3


@pytest.mark.parametrize(("form", "seconds", "at_least"), [("delta", 1, 1.0), ("date", 2, 1.0)])
async def test_retry_after_is_obeyed(site: RunningDemoSite, form: str, seconds: int, at_least: float) -> None:
    key = f"/_test/retry-after/obey-{form}"
    async with make_fetcher() as fetcher:
        started = time.monotonic()
        outcome = await fetcher.fetch(f"{site.base_url}{key}?seconds={seconds}&form={form}")
        waited = time.monotonic() - started
    assert isinstance(outcome, Fetched)
    assert outcome.attempts == 2
    assert waited >= at_least  # an HTTP date has whole-second resolution: 2 s ahead is at least 1 s ahead
    assert site.stats.count(key) == 2


async def test_retry_after_over_the_cap_is_handed_back_without_waiting(site: RunningDemoSite) -> None:
    async with make_fetcher() as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/retry-after/long?seconds=600")
    assert isinstance(outcome, Failed)
    assert (outcome.retryable, outcome.status, outcome.retry_after_s) == (True, 429, 600.0)
    assert site.stats.count("/_test/retry-after/long") == 1


async def test_conditional_fetch_not_modified(site: RunningDemoSite) -> None:
    async with make_fetcher() as fetcher:
        first = await fetcher.fetch(f"{site.base_url}/_test/etag/k1")
        assert isinstance(first, Fetched)
        assert first.validators.etag
        second = await fetcher.fetch(f"{site.base_url}/_test/etag/k1", first.validators)
        page = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html")
        assert isinstance(page, Fetched)
        again = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html", page.validators)
    assert isinstance(second, NotModified)
    assert second.validators == first.validators
    assert isinstance(again, NotModified)
    records = await logged(site, "/_test/etag/k1", 2)
    assert [r.if_none_match for r in records] == [None, first.validators.etag]
    assert [r.if_modified_since for r in records] == [None, first.validators.last_modified]


async def test_gzip_page_is_decoded(site: RunningDemoSite) -> None:
    async with make_fetcher(user_agent="SluiceTest/9") as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/catalogue/page-2.html")
        stats = fetcher.stats
    assert isinstance(outcome, Fetched)
    assert outcome.body.lstrip().lower().startswith(b"<!doctype html")
    assert stats.bytes_raw < stats.bytes_body  # it came gzipped
    assert [r.user_agent for r in await logged(site, "/catalogue/page-2.html", 1)] == ["SluiceTest/9"]


@pytest.mark.parametrize("length", ["1", "0"])
async def test_body_cap(site: RunningDemoSite, transport_name: str, length: str) -> None:
    async with make_fetcher(transport_name, max_body_bytes=MB) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/big?bytes={8 * MB}&length={length}")
        raw = fetcher.stats.bytes_raw
    assert isinstance(outcome, Failed)
    assert (outcome.reason, outcome.retryable) == ("body over 1048576 bytes", False)
    assert raw < 2 * MB  # refused on Content-Length, or stopped shortly after the cap


async def test_gzip_bomb_cap(site: RunningDemoSite, transport_name: str) -> None:
    async with make_fetcher(transport_name, max_body_bytes=MB) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/gzip-bomb?bytes={128 * MB}")
        stats = fetcher.stats
    assert isinstance(outcome, Failed)
    assert (outcome.reason, outcome.retryable) == ("body over 1048576 bytes", False)
    assert stats.bytes_raw < 100_000  # of ~130 KB of gzip (128 MB inflated): stopped after the first chunk
    assert stats.bytes_body == 0


async def test_content_types(site: RunningDemoSite) -> None:
    async with make_fetcher() as fetcher:
        json_page = await fetcher.fetch(f"{site.base_url}/_test/json")
        cp1252 = await fetcher.fetch(f"{site.base_url}/_test/cp1252")
    assert json_page == Skipped(f"{site.base_url}/_test/json", "content-type application/json not accepted")
    assert isinstance(cp1252, Fetched)
    assert cp1252.content_type.startswith("text/html")


async def test_redirect_loop_hits_the_limit(site: RunningDemoSite) -> None:
    async with make_fetcher(max_redirects=5) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/redirect-loop/0")
    assert isinstance(outcome, Failed)
    assert (outcome.reason, outcome.retryable) == ("too many redirects (6)", False)
    assert site.stats.snapshot(with_log=False)["total"] == 6


async def test_ssrf_refusals_on_redirect_hops(site: RunningDemoSite) -> None:
    """The site's own origin is trusted explicitly; every other loopback or metadata hop must be refused."""
    port = site.port
    guard = AddressGuard(allow_loopback=False, trusted=[f"127.0.0.1:{port}"])
    targets = {
        f"http://localhost:{port}/catalogue/page-1.html": "localhost resolves to 127.0.0.1: "
        "address 127.0.0.1 is loopback",
        "http://169.254.169.254/latest/meta-data/": "address 169.254.169.254 is link-local",
        f"http://[::ffff:127.0.0.1]:{port}/": "is loopback (IPv4-mapped 127.0.0.1)",
        f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/": "address 127.0.0.1 is loopback",
    }
    async with make_fetcher(guard=guard) as fetcher:
        direct = await fetcher.fetch(f"http://localhost:{port}/catalogue/page-1.html")
        for target, reason in targets.items():
            outcome = await fetcher.fetch(f"{site.base_url}/_test/redirect?to={target}")
            assert isinstance(outcome, Skipped), outcome
            assert outcome.reason.startswith("redirect to ")
            assert outcome.reason.endswith(reason)
    assert isinstance(direct, Skipped)
    assert direct.reason.endswith("is loopback")
    assert site.stats.count("/_test/redirect") == len(targets)
    assert site.stats.snapshot(with_log=False)["total"] == len(targets)  # no refused hop reached the site


async def test_loopback_refused_by_default(site: RunningDemoSite) -> None:
    async with PageFetcher(politeness()) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html")
    assert outcome == Skipped(f"{site.base_url}/catalogue/page-1.html", "address 127.0.0.1 is loopback")
    assert site.stats.snapshot(with_log=False)["total"] == 0


async def test_robots_disallow(site: RunningDemoSite) -> None:
    async with make_fetcher(obey_robots=True) as fetcher:
        private = await fetcher.fetch(f"{site.base_url}/private/secret.html")
        public = [await fetcher.fetch(f"{site.base_url}/catalogue/page-{n}.html") for n in (1, 2, 3)]
    assert private == Skipped(f"{site.base_url}/private/secret.html", "robots.txt disallows")
    assert all(isinstance(o, Fetched) for o in public)
    assert site.stats.count("/robots.txt") == 1
    assert site.stats.count("/private/secret.html") == 0


async def test_per_domain_and_global_caps() -> None:
    with running_demo_site(books=100, latency_ms=40) as site:
        port = site.port
        hosts = ("127.0.0.1", "localhost")
        urls = [(f"http://{h}:{port}/catalogue/page-{n}.html", None) for n in range(1, 6) for h in hosts]
        async with make_fetcher(concurrency=8, concurrency_per_domain=2) as fetcher:
            outcomes = [o async for o in fetcher.fetch_many(urls)]
        per_host = site.stats.snapshot(with_log=False)["max_in_flight_by_host"]
        assert all(isinstance(o, Fetched) for o in outcomes)
        assert per_host == {"127.0.0.1": 2, "localhost": 2}  # the per-domain cap, not the global 8

        site.reset()
        async with make_fetcher(concurrency=3, concurrency_per_domain=2) as fetcher:
            outcomes = [o async for o in fetcher.fetch_many(urls)]
        snapshot = site.stats.snapshot(with_log=False)
        assert all(isinstance(o, Fetched) for o in outcomes)
        assert snapshot["max_in_flight"] == 3  # the global cap, though two hosts x 2 would allow 4
        assert max(snapshot["max_in_flight_by_host"].values()) == 2


async def test_connection_reset_is_retried_then_retryable(site: RunningDemoSite, transport_name: str) -> None:
    async with make_fetcher(transport_name) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/reset")
    assert outcome == Failed(f"{site.base_url}/_test/reset", "connection reset", True, None, None, 3)
    assert site.stats.count("/_test/reset") == 3


async def test_slow_body_times_out(site: RunningDemoSite, transport_name: str) -> None:
    async with make_fetcher(transport_name, timeout_seconds=0.3, retry=RetryPolicy(times=0)) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/slow?seconds=3")
    assert outcome == Failed(f"{site.base_url}/_test/slow?seconds=3", "timeout", True, None, None, 1)


async def test_404_is_permanent_and_sent_once(site: RunningDemoSite) -> None:
    async with make_fetcher() as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/_test/status/404")
    assert outcome == Failed(f"{site.base_url}/_test/status/404", "http 404", False, 404, None, 1)
    assert site.stats.count("/_test/status/404") == 1


async def test_dns_rebinding_is_caught_at_connect_time(site: RunningDemoSite) -> None:
    """The pre-check is told localhost is public (a rebinding DNS); the default transport re-checks on connect."""

    async def lying_dns(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    guard = AddressGuard(allow_loopback=False, resolver=lying_dns)
    async with PageFetcher(politeness(), guard=guard) as fetcher:
        outcome = await fetcher.fetch(f"http://localhost:{site.port}/catalogue/page-1.html")
    assert isinstance(outcome, Skipped)
    assert outcome.reason == "localhost resolves to 127.0.0.1 at connect time: address 127.0.0.1 is loopback"
    assert site.stats.snapshot(with_log=False)["total"] == 0


@pytest.mark.parametrize("via", ["url", "redirect", "relative-redirect"])
async def test_credentials_in_a_url_are_never_sent(site: RunningDemoSite, transport_name: str, via: str) -> None:
    """``http://user:pass@host/`` as a URL or a redirect target: the request carries no Authorization."""
    host = site.base_url.removeprefix("http://")
    echo = f"http://mallory:secret@{host}/_test/headers"
    url = {
        "url": echo,
        "redirect": f"{site.base_url}/_test/redirect?to={echo}",
        "relative-redirect": f"{site.base_url}/_test/redirect?to=//mallory:secret@{host}/_test/headers",
    }[via]
    async with make_fetcher(transport_name, content_types=["application/json"]) as fetcher:
        outcome = await fetcher.fetch(url)
    assert isinstance(outcome, Fetched), outcome
    echoed = {k.lower(): v for k, v in json.loads(outcome.body).items()}
    assert "authorization" not in echoed
    assert "@" not in outcome.final_url
    assert outcome.final_url.endswith("/_test/headers")


PATHS = [
    "/catalogue/page-1.html",  # the plain case: a GET, a 200
    "/_test/etag/k",  # a 200, then a 304 on its validators (below)
    "/_test/redirect-chain/2",  # redirects: every hop checked again
    "/_test/redirect?to=http://169.254.169.254/latest/meta-data/",  # a hop to a refused address
    "/_test/redirect?to=//mallory:secret@{host}/_test/headers",  # credentials a redirect hands out, never sent
    "/_test/status/404",
    "/_test/flaky/f?fail=1&status=503",  # retried
    "/_test/reset",  # the connection lost after the head
    f"/_test/big?bytes={2 * MB}&length=1",  # declared over the cap
    f"/_test/big?bytes={2 * MB}&length=0",  # over the cap once read
    f"/_test/gzip-bomb?bytes={16 * MB}",  # over the cap once inflated
    "/_test/sitemap-bomb?bytes=1000",  # a content type not asked for
    "/_test/slow?seconds=3",  # over the time limit
]


async def test_the_default_wire_gives_the_outcomes_httpx_gives(demo: RunningDemoSite) -> None:
    """The default wire's path (aiohttp straight, one coroutine for send, head and body) keeps every check the
    httpx path has: the same outcome for each case, the plain one and each that needs care. A shortcut on the
    plain path that dropped a check (an address, a redirect hop, credentials, the cap, the time limit) shows here."""
    outcomes: dict[str, list[object]] = {}
    host = demo.base_url.removeprefix("http://")
    guard = AddressGuard(allow_loopback=False, trusted=[host])
    limits: dict[str, Any] = {
        "max_body_bytes": MB,
        "timeout_seconds": 0.5,
        "content_types": ["text/html", "application/json"],
    }
    for name in ("default", "httpx"):
        demo.reset()
        got: list[object] = []
        async with make_fetcher(name, guard, **limits) as fetcher:
            for path in PATHS:
                outcome = await fetcher.fetch(demo.base_url + path.replace("{host}", host))
                got.append(replace(outcome, elapsed_s=0.0) if isinstance(outcome, Fetched | NotModified) else outcome)
                if path == "/_test/etag/k" and isinstance(outcome, Fetched):
                    again = await fetcher.fetch(outcome.url, outcome.validators)
                    got.append(replace(again, elapsed_s=0.0) if isinstance(again, NotModified) else again)
        outcomes[name] = got
    assert [type(o).__name__ for o in outcomes["default"]] == [
        *("Fetched", "Fetched", "NotModified", "Fetched", "Skipped", "Fetched"),
        *("Failed", "Fetched", "Failed", "Failed", "Failed", "Failed", "Skipped", "Failed"),
    ]
    assert outcomes["default"] == outcomes["httpx"]
    echoed = outcomes["default"][5]
    assert isinstance(echoed, Fetched)
    assert b"authorization" not in echoed.body.lower()

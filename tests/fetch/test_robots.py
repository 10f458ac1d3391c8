"""robots.txt through the fetcher: rules, one fetch per origin, RFC 9309 status handling, Crawl-delay."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from sluice.fetch import Failed, Fetched, PageFetcher, RobotsCache, Skipped
from sluice.fetch.errors import DeferredFetchError
from sluice.fetch.robots import ROBOTS_MAX_BYTES, RobotsResponse, robots_url

pytestmark = pytest.mark.anyio
Respond = Callable[..., httpx.Response]
FetcherFactory = Callable[..., PageFetcher]
RULES = b"User-agent: *\nDisallow: /private/\n\nUser-agent: slowbot\nCrawl-delay: 0.1\n"


def site(respond: Respond, robots: Callable[[], httpx.Response]) -> tuple[Counter[str], object]:
    hits: Counter[str] = Counter()

    async def handler(request: httpx.Request) -> httpx.Response:
        hits[request.url.path] += 1
        if request.url.path == "/robots.txt":
            await asyncio.sleep(0.01)  # let concurrent callers pile up on the in-flight fetch
            return robots()
        if request.url.path == "/hop":
            return respond(302, headers={"location": "/private/after-redirect"})
        return respond()

    return hits, handler


async def test_disallowed_pages_are_skipped_and_robots_fetched_once(
    mock_fetcher: FetcherFactory, respond: Respond
) -> None:
    hits, handler = site(respond, lambda: respond(body=RULES, headers={"content-type": "text/plain"}))
    async with mock_fetcher(handler, obey_robots=True) as fetcher:
        urls = [f"http://example.com/{'private/' if i % 2 else ''}p{i}" for i in range(20)]
        outcomes = await asyncio.gather(*(fetcher.fetch(u) for u in urls))
        hop = await fetcher.fetch("http://example.com/hop")
    assert all(isinstance(o, Skipped) and o.reason == "robots.txt disallows" for o in outcomes[1::2])
    assert all(isinstance(o, Fetched) for o in outcomes[::2])
    assert hop == Skipped(
        "http://example.com/hop", "redirect to http://example.com/private/after-redirect: robots.txt disallows"
    )
    assert hits["/robots.txt"] == 1
    assert not any(path.startswith("/private/") for path in hits)


@pytest.mark.parametrize("status", [404, 403, 401, 410])
async def test_unavailable_robots_allows_everything(
    mock_fetcher: FetcherFactory, respond: Respond, status: int
) -> None:
    hits, handler = site(respond, lambda: respond(status, body=b"Disallow: /"))
    async with mock_fetcher(handler, obey_robots=True) as fetcher:
        assert isinstance(await fetcher.fetch("http://example.com/private/x"), Fetched)
    assert hits["/robots.txt"] == 1


@pytest.mark.parametrize("status", [500, 503, 429, 501])
async def test_unreachable_robots_disallows_the_origin(
    mock_fetcher: FetcherFactory, respond: Respond, status: int
) -> None:
    hits, handler = site(respond, lambda: respond(status))
    async with mock_fetcher(handler, obey_robots=True) as fetcher:
        first = await fetcher.fetch("http://example.com/a")
        second = await fetcher.fetch("http://example.com/b")
        assert not await fetcher.robots.allowed("http://example.com/c", "any")
    reason = f"robots.txt unreachable (http {status}): origin disallowed"
    assert first == Failed("http://example.com/a", reason, True, None, None, 1)
    assert isinstance(second, Failed)
    assert second.reason == reason
    retried = status != 501  # 501 is not among the spec's retry statuses
    assert hits["/robots.txt"] == (3 if retried else 1)  # the robots fetch itself is retried, then cached
    assert hits["/a"] == hits["/b"] == 0


async def test_robots_unreachable_over_the_network(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/robots.txt":
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return respond()

    async with mock_fetcher(handler, obey_robots=True) as fetcher:
        outcome = await fetcher.fetch("http://example.com/a")
    assert isinstance(outcome, Failed)
    assert outcome.retryable
    assert outcome.reason == "robots.txt unreachable (cannot connect): origin disallowed"


async def test_long_robots_is_truncated_not_refused(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    body = RULES + b"# " + b"x" * (2 * ROBOTS_MAX_BYTES) + b"\nDisallow: /late/\n"
    _hits, handler = site(respond, lambda: respond(body=body, headers={"content-type": "text/plain"}))
    async with mock_fetcher(handler, obey_robots=True, max_body_bytes=1024 * 1024) as fetcher:
        private = await fetcher.fetch("http://example.com/private/x")
        late = await fetcher.fetch("http://example.com/late/x")
    assert isinstance(private, Skipped)
    assert isinstance(late, Fetched)  # the rule after the cap was never read


async def test_crawl_delay_is_honoured(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    starts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/robots.txt":
            return respond(body=RULES, headers={"content-type": "text/plain"})
        starts.append(time.monotonic())
        return respond()

    async with mock_fetcher(handler, obey_robots=True, user_agent="SlowBot/2.0", concurrency=4) as fetcher:
        outcomes = [o async for o in fetcher.fetch_many((f"http://example.com/p{i}", None) for i in range(3))]
        assert fetcher.robots.crawl_delay("http://example.com/", "SlowBot/2.0") == pytest.approx(0.1)
    assert all(isinstance(o, Fetched) for o in outcomes)
    assert len(starts) == 3
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.1


async def test_cache_api_one_load_per_origin() -> None:
    loads: list[str] = []

    async def loader(url: str) -> RobotsResponse:
        loads.append(url)
        await asyncio.sleep(0.01)
        return RobotsResponse(200, b"User-agent: *\nDisallow: /x\nCrawl-delay: 9999\n")

    cache = RobotsCache(loader, max_crawl_delay_s=60)
    answers = await asyncio.gather(*(cache.allowed(f"http://a.example/{p}", "bot") for p in ("x", "y") * 10))
    assert answers == [False, True] * 10
    assert await cache.allowed("https://a.example/x", "bot") is False
    assert await cache.allowed("http://a.example:8080/y", "bot") is True
    assert loads == ["http://a.example/robots.txt", "https://a.example/robots.txt", "http://a.example:8080/robots.txt"]
    assert cache.crawl_delay("http://a.example/anything", "bot") == 60.0
    assert cache.crawl_delay("http://unloaded.example/", "bot") is None


async def test_sitemap_lines_are_read_from_the_same_single_load() -> None:
    loads: list[str] = []
    bodies = {
        "http://a.example/robots.txt": b"Sitemap: http://a.example/s.xml\nUser-agent: *\nDisallow: /x\nsitemap: /r\n",
        "http://b.example/robots.txt": b"User-agent: *\nDisallow:\n",
    }

    async def loader(url: str) -> RobotsResponse:
        loads.append(url)
        return RobotsResponse(200, bodies[url]) if url in bodies else RobotsResponse(503)

    cache = RobotsCache(loader)
    assert await cache.sitemaps("http://a.example/page") == ["http://a.example/s.xml", "/r"]  # as written
    assert await cache.allowed("http://a.example/x", "bot") is False
    assert await cache.sitemaps("http://b.example/") == []
    with pytest.raises(DeferredFetchError, match=r"robots\.txt unreachable"):
        await cache.sitemaps("http://c.example/")
    assert loads == ["http://a.example/robots.txt", "http://b.example/robots.txt", "http://c.example/robots.txt"]


def test_robots_url() -> None:
    assert robots_url("HTTP://Example.COM:80/a/b?c#d") == "http://example.com/robots.txt"
    assert robots_url("https://[::1]:8443/x") == "https://[::1]:8443/robots.txt"


async def test_closing_cancels_a_robots_fetch_under_way(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    release = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/robots.txt":
            await release.wait()
        return respond()

    fetcher = mock_fetcher(handler, obey_robots=True)
    page = asyncio.create_task(fetcher.fetch("http://example.com/a"))
    for _ in range(100):  # bounded: until the robots fetch is under way
        if fetcher.stats.requests:
            break
        await asyncio.sleep(0.001)
    await fetcher.aclose()
    with pytest.raises(asyncio.CancelledError):
        await page
    assert fetcher.stats.requests == 1

"""PageFetcher on httpx.MockTransport: outcomes, retries, redirects, gates, robots and bounds."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import pytest

from sluice.fetch import Failed, Fetched, NotModified, PageFetcher, Skipped, Validators
from sluice.spec import RetryPolicy

pytestmark = pytest.mark.anyio
Respond = Callable[..., httpx.Response]
FetcherFactory = Callable[..., PageFetcher]


async def test_sends_user_agent_and_only_decodable_encodings(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return respond()

    async with mock_fetcher(handler, user_agent="TestBot/1.0") as fetcher:
        outcome = await fetcher.fetch("http://example.com/a")
    assert isinstance(outcome, Fetched)
    assert outcome.body == b"<p>ok</p>"
    assert len(outcome.content_hash) == 32
    assert outcome.content_hash == hashlib.sha256(b"<p>ok</p>").hexdigest()[:32]
    assert seen[0]["user-agent"] == "TestBot/1.0"
    assert seen[0]["accept-encoding"] == "gzip, deflate"
    assert "cookie" not in seen[0]


async def test_cookies_are_not_kept(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return respond(headers={"set-cookie": "session=abc; Path=/"})

    async with mock_fetcher(handler) as fetcher:
        await fetcher.fetch("http://example.com/a")
        await fetcher.fetch("http://example.com/b")
    assert seen == [None, None]


@pytest.mark.parametrize(
    ("content_type", "accepted"),
    [
        ("text/html; charset=windows-1252", True),
        ("TEXT/HTML", True),
        ("application/xhtml+xml", True),
        (None, True),
        ("application/json", False),
        ("image/png", False),
    ],
)
async def test_content_type_gate(
    mock_fetcher: FetcherFactory, respond: Respond, content_type: str | None, accepted: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        response = respond()
        del response.headers["content-type"]
        if content_type is not None:
            response.headers["content-type"] = content_type
        return response

    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/x")
    if accepted:
        assert isinstance(outcome, Fetched)
        assert outcome.content_type == (content_type or "text/html")
    else:
        media = (content_type or "").lower()
        assert outcome == Skipped("http://example.com/x", f"content-type {media} not accepted")


async def test_content_type_wildcard(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    async with mock_fetcher(lambda r: respond(headers={"content-type": "text/plain"}), content_types=["text/*"]) as f:
        assert isinstance(await f.fetch("http://example.com/robots-like.txt"), Fetched)


async def test_redirect_is_followed_and_every_hop_checked(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    paths: Counter[str] = Counter()

    def handler(request: httpx.Request) -> httpx.Response:
        paths[f"{request.url.host}{request.url.path}"] += 1
        if request.url.path == "/moved":
            return respond(301, headers={"location": "http://other.example/new"})
        if request.url.path == "/to-metadata":
            return respond(302, headers={"location": "http://169.254.169.254/latest/meta-data/"})
        if request.url.path == "/to-private-name":
            return respond(307, headers={"location": "//evil.example/x"})
        if request.url.path == "/to-mapped":
            return respond(308, headers={"location": "http://[::ffff:127.0.0.1]:8080/"})
        return respond()

    async with mock_fetcher(handler) as fetcher:
        moved = await fetcher.fetch("http://example.com/moved")
        metadata = await fetcher.fetch("http://example.com/to-metadata")
        private = await fetcher.fetch("http://example.com/to-private-name")
        mapped = await fetcher.fetch("http://example.com/to-mapped")
    assert isinstance(moved, Fetched)
    assert moved.final_url == "http://other.example/new"
    assert metadata == Skipped(
        "http://example.com/to-metadata",
        "redirect to http://169.254.169.254/latest/meta-data/ refused: address 169.254.169.254 is link-local",
    )
    assert isinstance(private, Skipped)
    assert "10.0.0.7 is private" in private.reason
    assert isinstance(mapped, Skipped)
    assert "loopback (IPv4-mapped 127.0.0.1)" in mapped.reason
    assert set(paths) == {
        "example.com/moved",
        "other.example/new",
        "example.com/to-metadata",
        "example.com/to-private-name",
        "example.com/to-mapped",
    }


@pytest.mark.parametrize(("limit", "requests"), [(5, 6), (0, 1), (2, 3)])
async def test_redirect_limit_is_a_permanent_failure(
    mock_fetcher: FetcherFactory, respond: Respond, limit: int, requests: int
) -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return respond(302, headers={"location": f"/loop/{len(sent)}"})

    async with mock_fetcher(handler, max_redirects=limit) as fetcher:
        outcome = await fetcher.fetch("http://example.com/loop/0")
    assert outcome == Failed("http://example.com/loop/0", f"too many redirects ({limit + 1})", False, attempts=1)
    assert len(sent) == requests


async def test_conditional_request_and_not_modified(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    seen: list[tuple[str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("if-none-match"), request.headers.get("if-modified-since")))
        if request.url.path == "/same":
            return respond(304, b"", {"etag": '"v2"'})
        return respond(200, b"new", {"etag": '"v3"', "last-modified": "Sat, 01 Mar 2025 12:00:00 GMT"})

    old = Validators('"v1"', "Fri, 28 Feb 2025 12:00:00 GMT")
    async with mock_fetcher(handler) as fetcher:
        same = await fetcher.fetch("http://example.com/same", old)
        changed = await fetcher.fetch("http://example.com/changed", old)
        plain = await fetcher.fetch("http://example.com/changed")
    assert isinstance(same, NotModified)
    assert same.validators == Validators('"v2"', "Fri, 28 Feb 2025 12:00:00 GMT")  # new ETag, old date kept
    assert isinstance(changed, Fetched)
    assert changed.validators == Validators('"v3"', "Sat, 01 Mar 2025 12:00:00 GMT")
    assert isinstance(plain, Fetched)
    assert seen == [('"v1"', "Fri, 28 Feb 2025 12:00:00 GMT")] * 2 + [(None, None)]


def _statuses(*codes: int, respond: Respond, headers: dict[str, str] | None = None) -> tuple[list[int], object]:
    sent: list[int] = []
    queue: Iterator[int] = iter(codes)

    def handler(request: httpx.Request) -> httpx.Response:
        code = next(queue, 200)
        sent.append(code)
        return respond(code, headers=headers if code != 200 else None)

    return sent, handler


async def test_retryable_status_then_success(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    sent, handler = _statuses(503, 502, respond=respond)
    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/flaky")
        assert fetcher.stats.retries == 2
    assert isinstance(outcome, Fetched)
    assert outcome.attempts == 3
    assert sent == [503, 502, 200]


async def test_retries_exhausted_is_retryable_failure(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    sent, handler = _statuses(503, 503, 503, 503, respond=respond)
    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/down")
    assert outcome == Failed("http://example.com/down", "http 503", True, 503, None, 3)
    assert len(sent) == 3


@pytest.mark.parametrize("code", [404, 403, 410, 400, 501])
async def test_other_errors_are_permanent_and_not_retried(
    mock_fetcher: FetcherFactory, respond: Respond, code: int
) -> None:
    sent, handler = _statuses(code, respond=respond)
    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/gone")
    assert outcome == Failed("http://example.com/gone", f"http {code}", False, code, None, 1)
    assert sent == [code]


async def test_retry_after_beyond_the_cap_is_handed_back(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    sent, handler = _statuses(429, respond=respond, headers={"retry-after": "600"})
    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/busy")
    assert isinstance(outcome, Failed)
    assert (outcome.retryable, outcome.status, outcome.retry_after_s, outcome.attempts) == (True, 429, 600.0, 1)
    assert outcome.reason == "http 429 (Retry-After 600s over the 5s cap)"
    assert sent == [429]


async def test_retry_after_within_the_cap_is_waited(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    _sent, handler = _statuses(503, respond=respond, headers={"retry-after": "1"})
    async with mock_fetcher(handler) as fetcher:
        started = time.monotonic()
        outcome = await fetcher.fetch("http://example.com/busy")
        waited = time.monotonic() - started
    assert isinstance(outcome, Fetched)
    assert outcome.attempts == 2
    assert waited >= 1.0


async def test_per_call_overrides(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    sent, handler = _statuses(503, 503, 503, respond=respond, headers={"retry-after": "2"})
    slow_policy = RetryPolicy(times=3, backoff_base_seconds=10, backoff_max_seconds=60)
    async with mock_fetcher(handler, retry=slow_policy) as fetcher:
        once = await fetcher.fetch("http://example.com/a", max_attempts=1)
        # Another host: example.com is paused by its Retry-After (tests/fetch/test_hosts.py)
        no_sleep = await fetcher.fetch("http://other.example/b", retry_sleep_cap=0.5)
    assert once == Failed("http://example.com/a", "http 503", True, 503, 2.0, 1)
    assert isinstance(no_sleep, Failed)
    assert no_sleep.retryable
    assert no_sleep.url == "http://other.example/b"
    assert no_sleep.retry_after_s == 2.0
    assert len(sent) == 2


async def test_backoff_wait_over_the_sleep_cap_is_handed_back(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    _sent, handler = _statuses(503, 503, respond=respond)
    slow_policy = RetryPolicy(times=3, backoff_base_seconds=60, backoff_max_seconds=60)
    async with mock_fetcher(handler, retry=slow_policy) as fetcher:
        outcome = await fetcher.fetch("http://example.com/a", retry_sleep_cap=0.0)
    assert isinstance(outcome, Failed)
    assert outcome.retryable
    assert outcome.attempts == 1
    assert outcome.retry_after_s is not None
    assert 0 <= outcome.retry_after_s <= 60


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "cannot connect"),
        (httpx.ReadTimeout("timed out"), "timeout"),
        (httpx.ReadError("[Errno 104] Connection reset by peer"), "connection reset"),
        (httpx.RemoteProtocolError("peer closed connection without sending complete message body"), "connection reset"),
    ],
)
async def test_transport_errors_are_retried_then_retryable(
    mock_fetcher: FetcherFactory, error: httpx.HTTPError, reason: str
) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise error

    async with mock_fetcher(handler) as fetcher:
        outcome = await fetcher.fetch("http://example.com/x")
    assert outcome == Failed("http://example.com/x", reason, True, None, None, 3)
    assert len(calls) == 3


async def test_total_timeout_covers_a_slow_answer(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return respond()

    async with mock_fetcher(handler, timeout_seconds=0.05, retry=RetryPolicy(times=0)) as fetcher:
        outcome = await fetcher.fetch("http://example.com/slow")
    assert outcome == Failed("http://example.com/slow", "timeout", True, None, None, 1)


async def test_declared_length_over_the_cap_is_refused_unread(mock_fetcher: FetcherFactory) -> None:
    read: list[int] = []

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            read.append(1)
            yield b"x" * 10

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/html", "content-length": str(10 * 1024 * 1024)}
        return httpx.Response(200, headers=headers, stream=Body())

    async with mock_fetcher(handler, max_body_bytes=1024 * 1024) as fetcher:
        outcome = await fetcher.fetch("http://example.com/huge")
    assert outcome == Failed("http://example.com/huge", "body over 1048576 bytes", False, None, None, 1)
    assert read == []


async def test_unsafe_and_invalid_urls(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return respond()

    async with mock_fetcher(handler) as fetcher:
        assert await fetcher.fetch("http://127.0.0.1/") == Skipped("http://127.0.0.1/", "address 127.0.0.1 is loopback")
        assert isinstance(await fetcher.fetch("http://meta.example/"), Skipped)
        assert isinstance(await fetcher.fetch("gopher://example.com/"), Skipped)
        missing = await fetcher.fetch("http://missing.example/")
    assert missing == Failed("http://missing.example/", "host missing.example not found", False, None, None, 1)
    assert sent == []


async def test_fetch_many_bounds_in_flight_and_reads_input_lazily(
    mock_fetcher: FetcherFactory, respond: Respond
) -> None:
    live = Counter[str]()
    peak = Counter[str]()

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        live[host] += 1
        live["all"] += 1
        peak[host] = max(peak[host], live[host])
        peak["all"] = max(peak["all"], live["all"])
        await asyncio.sleep(0.002)
        live[host] -= 1
        live["all"] -= 1
        return respond()

    pulled: list[int] = []

    def requests() -> Iterator[tuple[str, Validators | None]]:
        for i in range(300):
            pulled.append(i)
            yield f"http://{('example.com', 'other.example', 'third.example')[i % 3]}/p{i}", None

    got = 0
    async with mock_fetcher(handler, concurrency=5, concurrency_per_domain=2) as fetcher:
        async for outcome in fetcher.fetch_many(requests()):
            assert isinstance(outcome, Fetched)
            got += 1
            assert len(pulled) <= got + 5  # never more than `concurrency` fetches ahead of the consumer
        assert fetcher.stats.max_in_flight <= 5
    assert got == 300
    assert peak["all"] == 5
    assert max(peak[h] for h in ("example.com", "other.example", "third.example")) == 2


async def test_fetch_many_stops_cleanly_when_the_consumer_leaves(
    mock_fetcher: FetcherFactory, respond: Respond
) -> None:
    started: list[str] = []
    finished: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        started.append(request.url.path)
        await asyncio.sleep(0.01 if request.url.path == "/p0" else 5)
        finished.append(request.url.path)
        return respond()

    async with mock_fetcher(handler, concurrency=4) as fetcher:
        stream = fetcher.fetch_many((f"http://example.com/p{i}", None) for i in range(1000))
        async for outcome in stream:
            assert isinstance(outcome, Fetched)
            break
        await stream.aclose()  # type: ignore[attr-defined]
        assert fetcher.stats.in_flight == 0
    assert len(started) == 4
    assert finished == ["/p0"]


async def test_min_delay_spaces_request_starts(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    starts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        starts.append(time.monotonic())
        return respond()

    async with mock_fetcher(handler, min_delay_seconds=0.05, concurrency=8) as fetcher:
        urls = [(f"http://example.com/p{i}", None) for i in range(4)]
        outcomes = [o async for o in fetcher.fetch_many(urls)]
    assert all(isinstance(o, Fetched) for o in outcomes)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) == 3
    assert min(gaps) >= 0.05


async def test_closed_fetcher_refuses_new_work(mock_fetcher: FetcherFactory, respond: Respond) -> None:
    fetcher = mock_fetcher(lambda r: respond())
    await fetcher.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await fetcher.fetch("http://example.com/")

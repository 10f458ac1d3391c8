"""The adaptive throttle judges the host's latency, not the lag of our own event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from sluice.domain.hosts import host_key
from sluice.fetch import AddressGuard, Fetched, PageFetcher
from sluice.fetch.throttle import LAG_TICK_S, LoopLag, Throttle
from sluice.spec import Politeness
from sluice_tools.demosite import running_demo_site

pytestmark = pytest.mark.anyio


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_samples_inflated_by_loop_lag_do_not_cut_a_flat_host() -> None:
    t = Throttle(cap=8)
    for _ in range(5):
        t.on_answer(50, 200)
    for lag in [0, 80, 120, 150, 100] * 8:  # the host answers in 50 ms; our loop saw it up to 150 ms late
        t.on_answer(50 + lag, 200, lag_ms=lag)
    assert (t.cuts, t.target) == (0, 8)
    assert t.floor_ms == 50


def test_a_host_slowing_with_no_loop_lag_is_still_cut() -> None:
    t = Throttle(cap=8)
    for ms in [50] * 5 + [200] * 20:
        t.on_answer(ms, 200, lag_ms=0)
    assert t.cuts >= 2
    assert t.target < 6


def test_a_sample_that_is_mostly_our_lag_does_not_set_the_floor() -> None:
    t = Throttle(cap=8)
    t.on_answer(300, 200, lag_ms=290)  # the first answer, mostly our lag: nothing to judge by
    assert t.floor_ms is None
    t.on_answer(50, 200)
    t.on_answer(60, 200, lag_ms=55)  # an overestimated lag: 5 ms left, not the host's floor
    assert t.floor_ms == 50
    t.on_answer(80, 200, lag_ms=500)  # never below zero
    assert t.ewma_ms is not None
    assert t.ewma_ms >= 0


def test_throttle_statuses_still_cut_whatever_the_lag() -> None:
    t = Throttle(cap=8)
    t.on_answer(50, 429, lag_ms=1000)
    assert t.target == 4


def test_loop_lag_is_the_time_the_loop_was_busy_after_a_moment() -> None:
    clock = Clock()
    lag = LoopLag(clock)
    lag.note(99.0, 0.5)  # before the request: not its lag
    sent = clock.now
    lag.note(100.05, 0.0005)  # timer jitter, not lag
    lag.note(100.10, 0.030)  # busy 100.07-100.10
    lag.note(100.25, 0.120)  # busy 100.13-100.25
    lag.note(100.30, 0.010)  # busy 100.29-100.30
    clock.now = 100.32
    assert lag.since(sent) == pytest.approx(0.160)
    assert lag.since(100.20) == pytest.approx(0.060)  # busy before the answer could have come delayed nothing
    assert lag.since(100.30) == 0.0


async def test_loop_lag_ticks_on_the_running_loop_and_sees_it_blocked() -> None:
    lag = LoopLag()
    lag.start()
    sent = time.monotonic()
    await asyncio.sleep(LAG_TICK_S)
    time.sleep(0.1)  # noqa: ASYNC251 - the point: our own loop blocked
    await asyncio.sleep(0)  # the overdue tick runs in the next turns
    await asyncio.sleep(0)
    try:
        assert lag.since(sent) > 0.05  # a loop blocked for 100 ms shows as busy for at least half of it
    finally:
        lag.stop()
    assert lag.since(sent) > 0.05  # stopped: what it saw is kept, nothing is due


async def _rounds(fetcher: PageFetcher, base: str, block_s: float, rounds: int, width: int) -> None:
    """Warm-up one at a time (the floor), then ``rounds`` of ``width`` pages at once; with ``block_s``,
    our loop is blocked (time.sleep in a callback) while their answers come in."""
    for n in range(3):
        assert isinstance(await fetcher.fetch(f"{base}/catalogue/page-{n + 1}.html"), Fetched)
    loop = asyncio.get_running_loop()
    for r in range(rounds):
        if block_s:
            loop.call_later(0.005, time.sleep, block_s)
        urls = [f"{base}/catalogue/page-{1 + (r * width + i) % 5}.html" for i in range(width)]
        outcomes = await asyncio.gather(*(fetcher.fetch(u) for u in urls))
        assert all(isinstance(o, Fetched) for o in outcomes)


def _fetcher(width: int) -> PageFetcher:
    spec = Politeness(
        obey_robots=False, timeout_seconds=10, concurrency=width, concurrency_per_domain=width, min_delay_seconds=0
    )
    return PageFetcher(spec, guard=AddressGuard(allow_loopback=True))


async def test_a_blocked_loop_does_not_cut_a_host_whose_latency_is_flat() -> None:
    with running_demo_site(books=100, latency_ms=30) as site:
        async with _fetcher(4) as fetcher:
            await _rounds(fetcher, site.base_url, block_s=0.2, rounds=6, width=4)
            throttle = fetcher.gate._host(host_key(site.base_url)).throttle
            assert throttle.cuts == 0
            assert throttle.target == 4


async def test_a_host_slowing_under_load_is_still_cut_over_real_sockets() -> None:
    with running_demo_site(books=100, latency_ms=30, latency_per_request_ms=100, latency_knee=1) as site:
        async with _fetcher(4) as fetcher:
            await _rounds(fetcher, site.base_url, block_s=0.0, rounds=3, width=4)
            throttle = fetcher.gate._host(host_key(site.base_url)).throttle
            assert throttle.cuts >= 1

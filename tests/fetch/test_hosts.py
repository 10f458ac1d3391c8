"""The host gate's fleet parts: pauses, the breaker, the adaptive target, and what it hands on."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from sluice.domain.clock import FixedClock
from sluice.domain.hosts import HostState, RunCounts, group_id, host_key
from sluice.fetch.politeness import HostBlocked, HostGate, HostPaused
from sluice.fetch.throttle import Throttle
from sluice.spec.models import Breaker

RUN = "20261201T000000Z-abcdef"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
"""The fleet's time in these tests: years from the wall clock's, so a gate that read the wall clock would show."""
anyio = pytest.mark.anyio


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://Example.com/a", "example.com:443"),
        ("http://example.com/a", "example.com:80"),
        ("http://example.com:8080/a?b", "example.com:8080"),
        ("http://[::1]:9/x", "[::1]:9"),
    ],
)
def test_host_key_is_host_and_port(url: str, key: str) -> None:
    assert host_key(url) == key


def test_group_ids_are_what_sqs_takes() -> None:
    assert group_id("example.com:443") == "example.com:443"
    long = "a" * 200 + ".example:443"
    assert group_id(long).startswith("h:")
    assert len(group_id(long)) <= 128
    assert group_id(long) == group_id(long) != group_id("b" + long)


def test_throttle_halves_on_429_cuts_on_rising_latency_and_grows_back_while_flat() -> None:
    t = Throttle(cap=8)
    assert t.target == 8
    t.on_answer(10, 200)
    t.on_answer(10, 429)
    assert t.target == 4
    for _ in range(4):  # answers to requests sent before the cut change nothing
        t.on_answer(10, 429)
    assert t.target == 4
    t.on_answer(10, 429)
    assert t.target == 2
    flat = Throttle(cap=8, target=2, floor_ms=10)
    for _ in range(50):
        flat.on_answer(11, 200)
    assert flat.target == 8  # never above the cap
    rising = Throttle(cap=8)
    for ms in [10] * 5 + [200] * 40:
        rising.on_answer(ms, 200)
    assert rising.target < 4
    assert rising.cuts >= 2


def test_throttle_off_is_the_cap() -> None:
    t = Throttle(cap=6, adaptive=False)
    for _ in range(10):
        t.on_answer(500, 503)
    assert t.target == 6
    assert t.below_cap is None


@anyio
async def test_a_pause_holds_every_request_of_the_host_and_only_that_host() -> None:
    gate = HostGate(8, 4)
    gate.pause("a:80", 0.2)
    started = time.monotonic()
    async with gate.slot("b:80"):
        assert time.monotonic() - started < 0.1
    with pytest.raises(HostPaused) as paused:
        async with gate.slot("a:80", max_wait_s=0.05):
            pass
    assert 0.1 < paused.value.wait_s <= 0.2
    async with gate.slot("a:80"):
        assert time.monotonic() - started >= 0.2


@anyio
async def test_the_breaker_trips_on_the_share_of_refusals_and_skips_the_rest() -> None:
    gate = HostGate(8, 4, breaker=Breaker(min_answers=5, max_blocked_share=0.5))
    gate.adopt(RUN, {"a:80": HostState("a:80")})
    for _ in range(10):
        gate.answered("a:80", 200, 0.01)  # counting starts at the first refusal
    for status in (403, 200, 403, 403):
        gate.answered("a:80", status, 0.01)
    async with gate.slot("a:80"):
        pass  # 3 of 4: not judged yet
    gate.answered("a:80", 403, 0.01)
    with pytest.raises(HostBlocked, match=r"host a:80 blocked: .* 4 of 5 answers \(80%\)"):
        async with gate.slot("a:80"):
            pass
    [state] = gate.export(RUN, ["a:80"])
    assert state.counts(RUN).tripped is not None
    fresh = HostGate(8, 4, breaker=Breaker(min_answers=5))
    fresh.adopt(RUN, {"a:80": state})  # the next holder of the host knows
    with pytest.raises(HostBlocked):
        async with fresh.slot("a:80"):
            pass
    fresh.adopt("20261202T000000Z-abcdef", {"a:80": state})  # ... for that run only
    async with fresh.slot("a:80"):
        pass


def test_a_429_with_retry_after_is_obeyed_not_counted_and_one_without_is_a_refusal() -> None:
    clock = FixedClock(NOW)
    gate = HostGate(8, 4, breaker=Breaker(min_answers=1, max_blocked_share=0.5), clock=clock)
    gate.adopt(RUN, {h: HostState(h) for h in ("a:80", "b:80")})
    gate.answered("a:80", 429, 0.01, retry_after_s=30.0)
    gate.answered("b:80", 429, 0.01)
    states = {s.host: s for s in gate.export(RUN, ["a:80", "b:80"])}
    assert 25 < states["a:80"].paused_until - clock() <= 30  # handed on in the fleet's time: the whole fleet waits
    assert states["a:80"].counts(RUN) == RunCounts()
    assert states["b:80"].counts(RUN).tripped is not None


@anyio
async def test_what_is_handed_on_spacing_pause_and_target_and_nothing_when_there_is_nothing() -> None:
    quiet = HostGate(8, 4)
    quiet.adopt(RUN, {"a:80": HostState("a:80")})
    async with quiet.slot("a:80"):
        pass
    assert quiet.export(RUN, ["a:80"]) == []  # no delay, no pause, no throttling: no write

    clock = FixedClock(NOW)
    spaced = HostGate(8, 4, min_delay_s=5.0, clock=clock)
    spaced.adopt(RUN, {"a:80": HostState("a:80")})
    async with spaced.slot("a:80"):
        pass
    [state] = spaced.export(RUN, ["a:80"])
    assert 4 < state.next_start - clock() <= 5  # in the fleet's time, which the next holder reads it in

    after = HostGate(8, 4, min_delay_s=5.0, clock=clock)
    after.adopt(RUN, {"a:80": state})
    with pytest.raises(HostPaused):  # the next holder waits out the spacing the last one left
        async with after.slot("a:80", max_wait_s=1.0):
            pass

    clock.advance(5.0)  # the spacing has run out in the fleet's time: the next holder goes at once
    later = HostGate(8, 4, min_delay_s=5.0, clock=clock)
    later.adopt(RUN, {"a:80": state})
    async with later.slot("a:80", max_wait_s=0.5):
        pass


def test_host_state_round_trips_and_keeps_a_few_runs() -> None:
    state = HostState("a:80", next_start=1.5, target=3, floor_ms=12.5)
    for n in range(6):
        state = state.with_counts(f"2026120{n}T000000Z-abcdef", RunCounts(10, n))
    assert len(state.runs) == 4
    assert "20261205T000000Z-abcdef" in state.runs
    assert HostState.from_json("a:80", state.to_json()) == state

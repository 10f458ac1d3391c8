"""HostGate: per-host cap, spacing of starts, and no global slot held while only waiting."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from sluice.fetch.politeness import HostGate

pytestmark = pytest.mark.anyio


async def test_per_domain_cap_and_global_cap() -> None:
    gate = HostGate(concurrency=3, per_domain=2)
    live: dict[str, int] = {"a": 0, "b": 0, "all": 0}
    peak = dict(live)

    async def one(domain: str) -> None:
        async with gate.slot(domain):
            for key in (domain, "all"):
                live[key] += 1
                peak[key] = max(peak[key], live[key])
            await asyncio.sleep(0.005)
            for key in (domain, "all"):
                live[key] -= 1

    await asyncio.gather(*(one("ab"[i % 2]) for i in range(20)))
    assert peak == {"a": 2, "b": 2, "all": 3}
    assert gate.max_in_flight == 3
    assert gate.in_flight == 0


async def test_delay_spaces_starts_per_domain() -> None:
    gate = HostGate(concurrency=4, per_domain=4, min_delay_s=0.03)
    starts: list[float] = []

    async def one() -> None:
        async with gate.slot("a"):
            starts.append(time.monotonic())

    await asyncio.gather(*(one() for _ in range(4)))
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.03


async def test_waiting_for_a_delay_does_not_hold_the_global_slot() -> None:
    gate = HostGate(concurrency=1, per_domain=1)
    order: list[str] = []

    async def visit(domain: str, name: str, delay: float) -> None:
        async with gate.slot(domain, delay):
            order.append(name)

    await visit("slow.example", "slow-1", 0.2)
    waiting = asyncio.create_task(visit("slow.example", "slow-2", 0.2))
    await asyncio.sleep(0.01)  # slow-2 is now sleeping out the domain's delay
    await asyncio.wait_for(visit("fast.example", "fast", 0.0), timeout=5)
    await waiting
    assert order == ["slow-1", "fast", "slow-2"]


async def test_waiters_enter_in_arrival_order_and_a_rise_in_the_target_lets_as_many_in() -> None:
    gate = HostGate(concurrency=8, per_domain=1)
    holder_in, release = asyncio.Event(), asyncio.Event()
    entered: list[int] = []

    async def holder() -> None:
        async with gate.slot("a"):
            holder_in.set()
            await release.wait()

    async def waiter(n: int) -> None:
        async with gate.slot("a"):
            entered.append(n)
            await asyncio.sleep(0.05)

    first = asyncio.create_task(holder())
    await holder_in.wait()
    waiters = [asyncio.create_task(waiter(n)) for n in range(4)]
    await asyncio.sleep(0.01)
    assert entered == []
    gate._hosts["a"].throttle.target = 2  # the throttle raised it while the holder's answer came in
    release.set()
    await first
    await asyncio.sleep(0.02)
    assert entered == [0, 1]  # both freed slots taken at once, by the first two in line
    await asyncio.gather(*waiters)
    assert entered == [0, 1, 2, 3]


async def test_a_waiter_cancelled_after_it_was_let_in_passes_its_slot_on() -> None:
    gate = HostGate(concurrency=8, per_domain=1)
    holder_in, release = asyncio.Event(), asyncio.Event()
    entered: list[str] = []
    waiters: dict[str, asyncio.Task[None]] = {}

    async def holder() -> None:
        async with gate.slot("a"):
            holder_in.set()
            await release.wait()
        waiters["doomed"].cancel()  # let in by the release just now, and cancelled before it ran

    async def waiter(name: str) -> None:
        async with gate.slot("a"):
            entered.append(name)

    first = asyncio.create_task(holder())
    await holder_in.wait()
    for name in ("doomed", "patient"):
        waiters[name] = asyncio.create_task(waiter(name))
    await asyncio.sleep(0.01)
    release.set()
    await first
    await asyncio.wait_for(waiters["patient"], timeout=5)
    assert entered == ["patient"]
    assert waiters["doomed"].cancelled()


async def test_a_blocked_host_lets_every_waiter_in_to_be_refused() -> None:
    from sluice.fetch.politeness import HostBlocked

    gate = HostGate(concurrency=8, per_domain=1)
    holder_in, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with gate.slot("a"):
            holder_in.set()
            await release.wait()
            gate._hosts["a"].blocked_by = "host a blocked"

    async def waiter() -> str:
        try:
            async with gate.slot("a"):
                return "entered"
        except HostBlocked as exc:
            return str(exc)

    first = asyncio.create_task(holder())
    await holder_in.wait()
    waiters = [asyncio.create_task(waiter()) for _ in range(5)]
    await asyncio.sleep(0.01)
    release.set()
    await first
    assert await asyncio.wait_for(asyncio.gather(*waiters), timeout=5) == ["host a blocked"] * 5


async def test_a_slot_is_given_back_whatever_ends_it() -> None:
    """Left by an exception in the body, refused on entering (paused, blocked), or cancelled while waiting in
    line: the gate holds nothing for the request afterwards (no host slot, no global slot, no user)."""
    from sluice.fetch.politeness import HostBlocked, HostPaused

    gate = HostGate(concurrency=2, per_domain=1)

    def held() -> tuple[int, int, int, int, bool]:
        state = gate._hosts["a"]
        return state.active, state.users, state.woken, gate.in_flight, gate._global.locked()

    async def failing() -> None:
        async with gate.slot("a"):
            assert held() == (1, 1, 0, 1, False)
            raise RuntimeError("the body failed")

    with pytest.raises(RuntimeError):
        await failing()
    assert held() == (0, 0, 0, 0, False)

    gate.pause("a", 60)

    async def enter(max_wait_s: float | None = None) -> None:
        async with gate.slot("a", max_wait_s=max_wait_s):
            pass

    with pytest.raises(HostPaused):
        await enter(0.01)
    assert held() == (0, 0, 0, 0, False)
    gate._hosts["a"].not_before = float("-inf")

    holder_in, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with gate.slot("a"):
            holder_in.set()
            await release.wait()

    first = asyncio.create_task(holder())
    await holder_in.wait()
    queued = asyncio.create_task(holder())
    await asyncio.sleep(0.01)
    assert held()[:2] == (1, 2)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    await first
    assert held() == (0, 0, 0, 0, False)

    gate._hosts["a"].blocked_by = "host a blocked"
    with pytest.raises(HostBlocked):
        await enter()
    assert held() == (0, 0, 0, 0, False)
    assert gate.max_in_flight == 1

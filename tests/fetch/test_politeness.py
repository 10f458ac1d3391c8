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

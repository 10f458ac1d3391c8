"""bench.online_stages: a timed coroutine behaves as the coroutine it wraps, and its steps are charged to its stage."""

from __future__ import annotations

import asyncio

import pytest
from bench import online_stages


class _Box:
    async def work(self, n: int) -> int:
        total = 0
        for i in range(n):
            await asyncio.sleep(0)
            total += i
        return total

    async def fail(self) -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def waits(self, event: asyncio.Event) -> str:
        try:
            await event.wait()
        except asyncio.CancelledError:
            return "cancelled inside"
        return "set"


def test_a_timed_coroutine_returns_raises_and_is_cancelled_as_the_original() -> None:
    online_stages._spent.clear()
    online_stages._time_steps(_Box, "work", "work")
    online_stages._time_steps(_Box, "fail", "fail")
    online_stages._time_steps(_Box, "waits", "waits")
    box = _Box()

    async def main() -> tuple[int, str]:
        got = await box.work(5)
        with pytest.raises(ValueError, match="boom"):
            await box.fail()
        task = asyncio.create_task(box.waits(asyncio.Event()))
        await asyncio.sleep(0)
        task.cancel()
        return got, await task

    assert asyncio.run(main()) == (10, "cancelled inside")
    assert set(online_stages._spent) == {"work", "fail", "waits"}
    assert all(spent >= 0.0 for spent in online_stages._spent.values())


def test_a_timed_function_keeps_its_result_and_name() -> None:
    online_stages._spent.clear()

    class Holder:
        @staticmethod
        def double(x: int) -> int:
            return 2 * x

    online_stages._time_calls(Holder, "double", "double")
    assert Holder.double(21) == 42
    assert Holder.double.__name__ == "double"
    assert "double" in online_stages._spent

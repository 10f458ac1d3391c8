"""robots.txt shared by a run's fetchers: one asks the site, the others wait for its answer."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sluice.adapters.local.objects import FileObjects
from sluice.domain.clock import FixedClock
from sluice.domain.layout import robots_key
from sluice.fetch.robots import RobotsResponse
from sluice.pipeline import robots
from sluice.pipeline.robots import SharedRobots

URL = "https://books.example/robots.txt"


class MarkerWatch(FileObjects):
    """Objects that say when a fetcher lost the race for a robots.txt marker (it waits for the answer from then)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.lost = threading.Event()

    def put_new(self, key: str, body: bytes, content_type: str) -> bool:
        won = super().put_new(key, body, content_type)
        if not won:
            self.lost.set()
        return won


def test_the_first_fetcher_asks_the_site_and_the_others_wait_for_its_answer(tmp_path: Path) -> None:
    objects = MarkerWatch(tmp_path)

    async def scenario() -> list[RobotsResponse | None]:
        first, second = SharedRobots(objects, "books", "r1"), SharedRobots(objects, "books", "r1")
        assert await first.get(URL) is None  # this one fetches
        waiting = asyncio.create_task(second.get(URL))
        assert await asyncio.to_thread(objects.lost.wait, 5.0)  # the second is waiting now, not before
        await first.put(URL, RobotsResponse(200, b"User-agent: *\nDisallow: /private\n"))
        return [await waiting, await SharedRobots(objects, "books", "r1").get(URL)]

    for got in asyncio.run(scenario()):
        assert got == RobotsResponse(200, b"User-agent: *\nDisallow: /private\n")


def test_another_run_asks_again(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)

    async def scenario() -> RobotsResponse | None:
        await SharedRobots(objects, "books", "r1").put(URL, RobotsResponse(404))
        return await SharedRobots(objects, "books", "r2").get(URL)

    assert asyncio.run(scenario()) is None


def test_a_shared_failure_holds_only_for_its_time(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    clock = FixedClock(datetime(2026, 12, 1, 21, tzinfo=UTC))
    shared = SharedRobots(objects, "books", "r1", clock=clock)
    asyncio.run(shared.put(URL, RobotsResponse(503, error="unavailable")))

    clock.advance(robots.FAILURE_TTL_S)
    assert asyncio.run(shared.get(URL)) == RobotsResponse(503, error="unavailable")  # still its time
    clock.advance(1)
    assert asyncio.run(shared.get(URL)) is None  # past it: every fetcher asks the site again


def test_a_shared_failure_written_long_ago_is_not_used(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path)
    key = robots_key("books", "r1", URL)
    stale = {"status": 503, "body": "", "error": None, "permanent": False, "at": 0}
    objects.put(key, json.dumps(stale).encode(), "application/json")
    assert asyncio.run(SharedRobots(objects, "books", "r1").get(URL)) is None


def test_a_fetcher_that_never_answers_is_not_waited_on_forever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(robots, "WAIT_S", 0.2)
    objects = FileObjects(tmp_path)

    async def scenario() -> RobotsResponse | None:
        assert await SharedRobots(objects, "books", "r1").get(URL) is None  # took the marker, then died
        return await SharedRobots(objects, "books", "r1").get(URL)

    assert asyncio.run(scenario()) is None  # after WAIT_S: fetch it yourself

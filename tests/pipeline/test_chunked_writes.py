"""A batch written in two chunks while it fetches (pipeline/visit/writer.py): each chunk is written as a whole
batch is, so a worker dying between the chunks still counts every page and record once.

The demo batches here hold 5 URLs: the threshold for a split (``early_write_urls``, off on the stack by
default) is 2, so that they are written as 3 pages, then 2.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sluice.pipeline.visit.writer import ChunkedWrites, early_chunk
from sluice_tools.demosite import RunningDemoSite

from .conftest import Pipeline, SpecData
from .test_exactly_once import BOOKS, CRAWL, PAGES, assert_each_page_and_record_once, fail_first


def _parts_written(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    objects = pipeline.services.objects
    real = objects.put
    keys: list[str] = []

    def put(key: str, body: bytes, content_type: str) -> Any:
        if "/parts/" in key:
            keys.append(key)
        return real(key, body, content_type)

    monkeypatch.setattr(objects, "put", put)
    return keys


def test_a_batch_is_written_in_two_parts_and_counted_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.configure(urls_per_message=PAGES, early_write_urls=2)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    parts = _parts_written(pipeline, monkeypatch)
    batch = pipeline.receive(10)
    assert pipeline.deliver(batch) == set()
    assert len(parts) == 2  # the first three pages while the last two were fetched, then those two
    pipeline.finalize()
    assert_each_page_and_record_once(pipeline, run_id)


def test_worker_dying_between_the_chunks_counts_every_page_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.configure(urls_per_message=PAGES, early_write_urls=2)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    frontier = pipeline.services.frontier
    calls = [0]
    real = frontier.complete

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    # The first chunk is counted; the worker dies counting the second.
    monkeypatch.setattr(frontier, "complete", fail_first(1, counted, only=lambda *a: calls[0] >= 1))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {m.id for m in batch}
    assert pipeline.tally(CRAWL, run_id).done == 3
    pipeline.drain()
    pipeline.finalize()
    assert_each_page_and_record_once(pipeline, run_id)
    # The redelivery looked its pages up: the three counted were not fetched again.
    assert sum(site.stats.count(f"/catalogue/page-{n}.html") for n in range(1, PAGES + 1)) == PAGES + 2
    assert pipeline.tally(CRAWL, run_id).records == BOOKS


def test_writes_never_overlap_and_the_early_chunk_goes_while_visits_go_on() -> None:
    log: list[tuple[str, list[int]]] = []
    busy = threading.Lock()
    first_began, visits_over = threading.Event(), threading.Event()

    def write(chunk: list[int]) -> int:
        assert busy.acquire(blocking=False), "two chunks written at once"
        try:
            log.append(("write", list(chunk)))
            first_began.set()
            assert visits_over.wait(5.0)  # the early chunk is still being written while the batch visits on
            return len(chunk)
        finally:
            busy.release()

    async def batch() -> list[int]:
        writes: ChunkedWrites[int, int] = ChunkedWrites(write, early=3)
        for n in range(6):
            writes.add(n)
            log.append(("visited", [n]))
            if n == 2:  # the third visit ended: the early chunk must begin without waiting for the rest
                assert await asyncio.to_thread(first_began.wait, 5.0)
        visits_over.set()
        return await writes.finish()

    assert asyncio.run(batch()) == [3, 3]
    assert log.index(("write", [0, 1, 2])) < log.index(("visited", [5]))  # written while visits went on
    assert ("write", [3, 4, 5]) in log


def test_an_early_chunk_that_fails_fails_the_batch_after_its_visits() -> None:
    def write(chunk: list[int]) -> int:
        if 0 in chunk:
            raise RuntimeError("store unavailable")
        return len(chunk)

    async def batch() -> None:
        writes: ChunkedWrites[int, int] = ChunkedWrites(write, early=2)
        for n in range(4):
            writes.add(n)
            await asyncio.sleep(0)
        try:
            await writes.finish()
        finally:
            await writes.settle()

    with pytest.raises(RuntimeError, match="store unavailable"):
        asyncio.run(batch())


def test_a_small_batch_is_one_chunk() -> None:
    async def batch() -> list[int]:
        writes: ChunkedWrites[int, int] = ChunkedWrites(len, early=0)
        for n in range(5):
            writes.add(n)
        return await writes.finish()

    assert asyncio.run(batch()) == [5]
    assert early_chunk(19, None, 20) == 0
    assert early_chunk(100, None, 20) == 50  # half
    assert early_chunk(320, None, 20) == 100  # at most 100 pages a chunk...
    assert early_chunk(1000, None, 20) == 125  # ...unless that makes more than eight
    assert early_chunk(100, None, 0) == 0  # the stack's default: written whole


def test_a_large_batch_is_written_a_chunk_at_a_time_while_its_visits_go_on() -> None:
    """Chunks follow one another as visits end, none overlapping: a large batch is not written in two halves."""
    written: list[int] = []
    busy = threading.Lock()

    def write(chunk: list[int]) -> int:
        assert busy.acquire(blocking=False), "two chunks written at once"
        try:
            written.extend(chunk)
            return len(chunk)
        finally:
            busy.release()

    async def batch() -> list[int]:
        early = early_chunk(1000, None, 20)
        writes: ChunkedWrites[int, int] = ChunkedWrites(write, early)
        for n in range(1000):
            writes.add(n)
            if n % 10 == 9:
                await asyncio.sleep(0.001)  # visits take a while: the chunk's thread gets its turn
        return await writes.finish()

    answers = asyncio.run(batch())
    assert sorted(written) == list(range(1000))  # every visit written once
    assert len(answers) >= 6  # eight chunks of 125 when each is written before the next is due
    assert all(size >= 125 for size in answers[:-1])

"""Exactly once, end to end: however the queue delivers and wherever a worker dies, every page counts once
and every record lands in the run's output once.

Each test plays the event source mapping by hand, injects the fault between two steps, then checks
the run's exact counts (from its URLs), its summary and its output files. Every test runs on both
adapter sets (moto with the real handlers, and the local store).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from sluice.domain.layout import index_key
from sluice.pipeline.visit import page as page_visit
from sluice.spec import CrawlSpec
from sluice_tools.demosite import RunningDemoSite

from .conftest import Pipeline, SpecData

CRAWL = "books"
PAGES = 5
BOOKS = 100


def listing(n: int) -> str:
    return f"/catalogue/page-{n}.html"


def assert_each_page_and_record_once(pipeline: Pipeline, run_id: str, *, new: int = BOOKS) -> None:
    """The run finished with every page counted once and every record in its output once."""
    run = pipeline.run_state(CRAWL, run_id)
    assert run.status == "finished"
    t = pipeline.tally(CRAWL, run_id)
    assert (t.enqueued, t.done, t.fetched + t.not_modified, t.failed, t.pending) == (PAGES, PAGES, PAGES, 0, 0)
    assert (t.records_new, t.records) == (new, BOOKS)
    records = pipeline.records(CRAWL, run_id)
    keys = Counter(r["_key"] for r in records)
    assert len(records) == BOOKS
    assert max(keys.values()) == 1
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["records"]["total"] == summary["records"]["in_output"] == BOOKS
    assert summary["pages"]["enqueued"] == PAGES
    assert run.records == BOOKS


def fail_first(calls: int, real: Callable[..., Any], only: Callable[..., bool] = lambda *a: True) -> Callable[..., Any]:
    """``real``, except that its first ``calls`` matching calls raise as if the worker died there."""
    left = [calls]
    lock = threading.Lock()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lock:
            dies = only(*args) and left[0] > 0
            if dies:
                left[0] -= 1
        if dies:
            raise RuntimeError("worker died here")
        return real(*args, **kwargs)

    return wrapper


def test_message_delivered_twice_is_counted_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.configure(urls_per_message=1)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    first = pipeline.receive(1)
    assert pipeline.deliver(first) == set()
    pipeline.send_raw(first[0].body)  # the queue's at-least-once: the same body again, as another message
    pipeline.drain()
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)
    # A duplicate delivery (received once, like the original) is not looked up first: it fetches
    # its page again, and its result loses to the one already written.
    assert sorted(site.stats.count(listing(n)) for n in range(1, PAGES + 1)) == [1, 1, 1, 1, 2]


def test_duplicated_batch_writes_each_record_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.configure(urls_per_message=1)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    assert len(batch) == PAGES
    assert pipeline.deliver(batch) == set()
    pipeline.send_raw(*(m.body for m in batch))  # the whole batch again
    assert pipeline.drain() == 1
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)


def test_worker_dying_before_acknowledging_counts_nothing_twice(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.configure(urls_per_message=2)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == set()  # the handler succeeded, the worker died before deleting
    before = pipeline.tally(CRAWL, run_id)
    pipeline.make_visible(batch)  # its visibility timeout ran out
    again = pipeline.receive(10)
    assert {m.id for m in again} == {m.id for m in batch}
    assert {m.receives for m in again} == {2}
    assert pipeline.deliver(again) == set()
    pipeline.finalize()

    assert pipeline.tally(CRAWL, run_id) == before
    assert_each_page_and_record_once(pipeline, run_id)
    # A redelivery is looked up first: its pages were done, so none was fetched again.
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [1] * PAGES


def test_worker_dying_after_writing_its_part_and_before_counting_counts_records_new_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    frontier = pipeline.services.frontier
    monkeypatch.setattr(frontier, "complete", fail_first(1, frontier.complete))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {m.id for m in batch}
    # The batch's part was written, nothing was counted.
    assert pipeline.tally(CRAWL, run_id).done == 0
    pipeline.drain()
    pipeline.finalize()

    # The second attempt wrote its own part; the first one's is never read.
    assert_each_page_and_record_once(pipeline, run_id, new=BOOKS)


def test_worker_dying_before_counting_in_a_later_run_counts_records_unchanged(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    pipeline.run(CRAWL)
    run_id = pipeline.start(CRAWL)
    frontier = pipeline.services.frontier
    monkeypatch.setattr(frontier, "complete", fail_first(1, frontier.complete))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {m.id for m in batch}  # 304s, then died
    pipeline.make_visible(batch)
    pipeline.drain()
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id, new=0)
    t = pipeline.tally(CRAWL, run_id)
    assert (t.not_modified, t.records_unchanged) == (PAGES, BOOKS)


def test_batch_regrouped_on_redelivery_counts_each_page_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.configure(urls_per_message=1)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    frontier = pipeline.services.frontier
    # The second invocation dies before counting: its three pages are fetched and written, not counted.
    calls = [0]
    real = frontier.complete

    def second_dies(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("worker died here")
        return real(*args)

    monkeypatch.setattr(frontier, "complete", second_dies)
    # One receive, split in two invocations (a FIFO group gives nothing more while one of its messages is in flight).
    five = pipeline.receive(5)
    first = [five[:2], five[2:]]
    assert pipeline.invoke(first[0]) == set()
    assert pipeline.invoke(first[1]) == {m.id for m in first[1]}
    assert pipeline.tally(CRAWL, run_id).done == 2
    received = [m for b in first for m in b]
    pipeline.make_visible(received)  # neither worker deleted anything

    # Second attempt: the same messages regrouped as 3 and 2.
    again = pipeline.receive(5)
    second = [again[:3], again[3:]]
    assert [len(b) for b in second] == [3, 2]
    assert {m.id for m in first[0]} != {m.id for m in second[0]}
    for b in second:
        assert pipeline.deliver(b) == set()
    assert pipeline.receive(10) == []
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)


def test_concurrent_duplicate_deliveries_count_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    barrier = threading.Barrier(2, timeout=30)
    answers: list[set[str]] = []
    errors: list[BaseException] = []

    def container() -> None:  # a second fetcher container handed the same batch at the same time
        try:
            barrier.wait()
            answers.append(pipeline.invoke(batch))
        except BaseException as exc:
            errors.append(exc)
        finally:
            pipeline.close_container()

    workers = [threading.Thread(target=container) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert errors == []
    assert answers == [set(), set()]
    pipeline.ack(batch)
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)


def test_page_redelivered_after_dying_between_claiming_and_sending_its_links_sends_them(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One seed; each listing page leads to the next: the run only finishes if every link is sent.
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=[listing(1)], max_depth=PAGES - 1))
    run_id = pipeline.start(CRAWL)
    queue = pipeline.services.queue
    monkeypatch.setattr(queue, "send", fail_first(1, queue.send))
    first = pipeline.receive(10)
    assert pipeline.deliver(first) == {first[0].id}  # page 2 claimed, never sent
    t = pipeline.tally(CRAWL, run_id)
    assert (t.links, t.done) == (1, 0)
    pipeline.drain()
    pipeline.finalize()

    t = pipeline.tally(CRAWL, run_id)
    assert pipeline.run_state(CRAWL, run_id).status == "finished"
    assert (t.seeds, t.links, t.done, t.records_new) == (1, PAGES - 1, PAGES, BOOKS)
    assert len(pipeline.records(CRAWL, run_id)) == BOOKS
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [2, 1, 1, 1, 1]


def test_one_url_crashing_fails_its_message_alone_after_its_batch_is_written(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One URL crashing must not leave the batch's other URLs half-done, nor fail their messages."""
    pipeline.configure(urls_per_message=1)
    slow = ["/_test/slow/a?seconds=0.3&bytes=200", "/_test/slow/b?seconds=0.3&bytes=200"]
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=["/_test/status/404", *slow]))
    run_id = pipeline.start(CRAWL)
    real = page_visit.visit_page
    crashed = [False]

    async def crashes_once(spec: CrawlSpec, fetcher: Any, task: Any, **options: Any) -> Any:
        if task.url.endswith("/404") and not crashed[0]:
            crashed[0] = True
            raise RuntimeError("extraction crashed")
        return await real(spec, fetcher, task, **options)

    monkeypatch.setattr(page_visit, "visit_page", crashes_once)
    batch = pipeline.receive(10)
    failed = pipeline.deliver(batch)
    assert [m.body for m in batch if m.id in failed] == [m.body for m in batch if "/404" in m.body]
    # The slow pages finished and were counted before the invocation returned.
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched) == (2, 2)
    pipeline.drain()  # the crashed URL comes back and is counted
    pipeline.finalize()
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched, t.failed) == (3, 2, 1)


def test_page_whose_reused_records_are_gone_is_fetched_whole_not_emptied(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    first = pipeline.run(CRAWL)
    # The catalog run's page index is what says a page's records can be reused; without it, none can.
    objects = pipeline.services.objects
    index = objects.get(index_key(CRAWL, first))
    assert index is not None
    objects.put(index_key(CRAWL, first), index[:8], "application/octet-stream")  # the header, no pages
    site.reset()

    second = pipeline.run(CRAWL)

    t = pipeline.tally(CRAWL, second)
    assert (t.fetched, t.not_modified) == (PAGES, 0)
    assert_each_page_and_record_once(pipeline, second, new=0)  # unchanged: the digests still came along
    assert t.records_unchanged == BOOKS
    whole = [r for n in range(1, PAGES + 1) for r in site.stats.records(listing(n)) if r.if_none_match is None]
    assert len(whole) == PAGES, "every page was fetched once more without validators"

"""Exactly once, end to end: however SQS delivers, every page is counted once and every record lands once.

Each test plays the event source mapping by hand and injects the fault between two steps, then
checks the run's final ``records.jsonl``, its ledger counters and the objects it left in S3.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from sluice.aws.ledger import PageCounts
from sluice.extraction.urls import canonicalize_url
from sluice.handlers import fetcher
from sluice.spec import CrawlSpec
from sluice_tools.demosite import RunningDemoSite

CRAWL = "books"
PAGES = 5
BOOKS = 100


def listing(n: int) -> str:
    return f"/catalogue/page-{n}.html"


def seed_urls(spec: CrawlSpec) -> list[str]:
    return [canonicalize_url(u) for u in spec.seeds.iter_urls()]


def assert_each_page_and_record_once(pipeline: Any, spec: CrawlSpec, run_id: str, *, new: int = BOOKS) -> None:
    """The run finished with every page counted once and every record in its output once."""
    run = pipeline.run_state(CRAWL, run_id)
    assert run.status == "finished"
    c = run.counters
    assert (c["enqueued"], c["done"], c["fetched"] + c["not_modified"], c["failed"]) == (PAGES, PAGES, PAGES, 0)
    assert (c["records_new"], c["records_new"] + c["records_changed"] + c["records_unchanged"]) == (new, BOOKS)
    records = pipeline.records(CRAWL, run_id)
    keys = Counter(r["_key"] for r in records)
    assert len(records) == BOOKS
    assert max(keys.values()) == 1
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["records"]["total"] == summary["records"]["in_output"] == BOOKS
    objects = pipeline.services.objects
    expected = {objects.page_key(CRAWL, run_id, url) for url in seed_urls(spec)}
    expected |= {objects.records_key(CRAWL, run_id), objects.summary_key(CRAWL, run_id)}
    assert pipeline.object_keys(run_id) == expected


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


def test_message_delivered_twice_is_counted_once(pipeline: Any, site: RunningDemoSite, books_spec: Any) -> None:
    pipeline.configure(urls_per_message=1)
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    first = pipeline.receive(1)
    assert pipeline.deliver(first) == set()
    pipeline.send_raw(first[0]["Body"])  # SQS's at-least-once: the same body again, as another message
    pipeline.drain()
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, spec, run_id)
    # The duplicate found its page counted and fetched nothing.
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [1] * PAGES


def test_redelivered_batch_writes_each_record_once(pipeline: Any, site: RunningDemoSite, books_spec: Any) -> None:
    pipeline.configure(urls_per_message=1)
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    assert len(batch) == PAGES
    assert pipeline.deliver(batch) == set()
    pipeline.send_raw(*(m["Body"] for m in batch))  # the whole batch again
    assert pipeline.drain() == 1
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, spec, run_id)


def test_worker_dying_before_acknowledging_counts_nothing_twice(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    pipeline.configure(urls_per_message=2)
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == set()  # the handler succeeded, the worker died before deleting
    before = pipeline.run_state(CRAWL, run_id).counters
    pipeline.make_visible(batch)  # its visibility timeout ran out
    again = pipeline.receive(10)
    assert {m["MessageId"] for m in again} == {m["MessageId"] for m in batch}
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}
    assert pipeline.deliver(again) == set()
    pipeline.finalize()

    assert pipeline.run_state(CRAWL, run_id).counters == before
    assert_each_page_and_record_once(pipeline, spec, run_id)


def test_worker_dying_between_writing_records_and_counting_them_counts_them_as_new_once(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    ledger = pipeline.services.ledger
    monkeypatch.setattr(ledger, "complete", fail_first(PAGES, ledger.complete))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {m["MessageId"] for m in batch}
    # Records and page objects were written, nothing was counted.
    assert pipeline.run_state(CRAWL, run_id).counters["done"] == 0
    assert len(pipeline.object_keys(run_id)) == PAGES
    pipeline.drain()
    pipeline.finalize()

    # The second attempt found the records this very run wrote: still new, and counted once.
    assert_each_page_and_record_once(pipeline, spec, run_id, new=BOOKS)


def test_worker_dying_before_counting_in_a_later_run_counts_records_unchanged(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    pipeline.run(CRAWL)
    run_id = pipeline.start(CRAWL)
    ledger = pipeline.services.ledger
    monkeypatch.setattr(ledger, "complete", fail_first(PAGES, ledger.complete))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {m["MessageId"] for m in batch}  # 304s carried, then died
    pipeline.make_visible(batch)
    pipeline.drain()
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, spec, run_id, new=0)
    assert pipeline.run_state(CRAWL, run_id).counters["records_unchanged"] == BOOKS


def test_batch_regrouped_on_redelivery_counts_each_page_once(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline.configure(urls_per_message=1)
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    ledger = pipeline.services.ledger
    unlucky = {canonicalize_url(f"{site.base_url}{listing(n)}") for n in (2, 4)}
    monkeypatch.setattr(ledger, "complete", fail_first(2, ledger.complete, lambda crawl, run, url, *_: url in unlucky))

    # First attempt: batches of 2 and 3; pages 2 and 4 die before counting; the workers die before deleting.
    first = [pipeline.receive(2), pipeline.receive(3)]
    failed = set().union(*(pipeline.invoke(b) for b in first))
    assert len(failed) == 2
    assert pipeline.run_state(CRAWL, run_id).counters["done"] == PAGES - 2
    received = [m for b in first for m in b]
    pipeline.make_visible(received)

    # Second attempt: the same messages regrouped as 3 and 2.
    second = [pipeline.receive(3), pipeline.receive(2)]
    assert [len(b) for b in second] == [3, 2]
    assert {m["MessageId"] for m in first[0]} != {m["MessageId"] for m in second[0]}
    for b in second:
        assert pipeline.deliver(b) == set()
    assert pipeline.receive(10) == []
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, spec, run_id)


def test_concurrent_duplicate_deliveries_count_once(pipeline: Any, site: RunningDemoSite, books_spec: Any) -> None:
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
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
            fetcher.close_container()

    workers = [threading.Thread(target=container) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert errors == []
    assert answers == [set(), set()]
    pipeline.ack(batch)
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, spec, run_id)


def test_page_redelivered_after_dying_between_claiming_and_sending_its_links_sends_them(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One seed; each listing page leads to the next: the run only finishes if every link is sent.
    spec = pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=[listing(1)], max_depth=PAGES - 1))
    run_id = pipeline.start(CRAWL)
    queue = pipeline.services.queue
    monkeypatch.setattr(queue, "send", fail_first(1, queue.send))
    first = pipeline.receive(10)
    assert pipeline.deliver(first) == {first[0]["MessageId"]}  # page 2 claimed, never sent
    assert pipeline.run_state(CRAWL, run_id).counters["enqueued"] == 2
    pipeline.drain()
    pipeline.finalize()

    assert len(seed_urls(spec)) == 1
    run = pipeline.run_state(CRAWL, run_id)
    assert run.status == "finished"
    assert (run.counters["enqueued"], run.counters["done"], run.counters["records_new"]) == (PAGES, PAGES, BOOKS)
    assert len(pipeline.records(CRAWL, run_id)) == BOOKS
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [2, 1, 1, 1, 1]


def test_message_failure_waits_for_its_other_urls(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One URL crashing must not leave the message's other URLs half-done when the handler returns."""
    slow = ["/_test/slow/a?seconds=0.3&bytes=200", "/_test/slow/b?seconds=0.3&bytes=200"]
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=["/_test/status/404", *slow]))
    run_id = pipeline.start(CRAWL)
    ledger = pipeline.services.ledger
    broken = lambda crawl, run, url, counts, *_: isinstance(counts, PageCounts) and counts.outcome == "failed"  # noqa: E731
    monkeypatch.setattr(ledger, "complete", fail_first(1, ledger.complete, broken))
    batch = pipeline.receive(10)
    assert pipeline.invoke(batch) == {batch[0]["MessageId"]}
    # The slow pages finished (and were counted) before the message was reported failed.
    counters = pipeline.run_state(CRAWL, run_id).counters
    assert (counters["done"], counters["fetched"]) == (2, 2)
    pipeline.drain()  # the crashed URL comes back (visibility 0) and is counted
    pipeline.finalize()
    counters = pipeline.run_state(CRAWL, run_id).counters
    assert (counters["done"], counters["fetched"], counters["failed"]) == (3, 2, 1)


def test_page_whose_stored_records_expired_is_fetched_whole_not_emptied(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    spec = pipeline.spec(books_spec(CRAWL, site.base_url))
    first = pipeline.run(CRAWL)
    gone = canonicalize_url(f"{site.base_url}{listing(3)}")
    s3 = pipeline.services.objects
    s3._s3.delete_object(Bucket=s3.bucket, Key=s3.page_key(CRAWL, first, gone))  # the lifecycle rule's work
    site.reset()

    second = pipeline.run(CRAWL)

    run = pipeline.run_state(CRAWL, second)
    assert (run.counters["fetched"], run.counters["not_modified"]) == (1, PAGES - 1)
    assert_each_page_and_record_once(pipeline, spec, second, new=0)
    whole = [r for r in site.stats.records(listing(3)) if r.if_none_match is None]
    assert len(whole) == 1, "the page was fetched once more without validators"

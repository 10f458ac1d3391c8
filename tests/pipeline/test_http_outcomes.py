"""Transient and permanent HTTP failures through the fetcher: retried in process, via the queue, or not at all."""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime

import pytest

from sluice.domain.hosts import MAX_PAUSE_S, HostState
from sluice.pipeline.visit.requeue import IN_PROCESS_WAIT_CAP_S, visibility_backoff
from sluice_tools.demosite import RunningDemoSite

from .conftest import Logs, Pipeline, SpecData

CRAWL = "edge"


def only_page(pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, path: str, *, retry_times: int) -> str:
    """Start a run whose single seed is ``path``; return the run id."""
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=[path], retry_times=retry_times))
    return str(pipeline.start(CRAWL))


def test_503_then_success_is_retried_in_process_and_counted_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    run_id = only_page(pipeline, site, books_spec, "/_test/flaky/a?fail=2&status=503", retry_times=2)
    batch = pipeline.receive(10)

    assert pipeline.deliver(batch) == set()
    assert site.stats.count("/_test/flaky/a") == 3
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched, t.failed) == (1, 1, 0)
    assert pipeline.visibility_changes == []
    assert pipeline.in_queue() == 0


def test_503_beyond_the_in_process_retries_comes_back_through_the_queue_and_succeeds(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    run_id = only_page(pipeline, site, books_spec, "/_test/flaky/b?fail=3&status=503", retry_times=1)
    first = pipeline.receive(10)
    assert pipeline.deliver(first) == {first[0].id}
    assert pipeline.tally(CRAWL, run_id).done == 0
    assert [receipt for receipt, _ in pipeline.visibility_changes] == [first[0].receipt]

    second = pipeline.receive(10)
    assert [m.id for m in second] == [first[0].id]
    assert second[0].receives == 2
    assert pipeline.deliver(second) == set()

    assert site.stats.count("/_test/flaky/b") == 4  # 2 attempts per delivery
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched, t.failed) == (1, 1, 0)
    assert pipeline.in_queue() == 0
    assert [f["run_id"] for f in pipeline.finalize()] == [run_id]


@pytest.mark.parametrize("form", ["delta", "date"])
def test_429_with_retry_after_over_the_in_process_cap_returns_the_message_for_at_least_that_long(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, logs: Logs, form: str
) -> None:
    seconds = IN_PROCESS_WAIT_CAP_S + 3
    run_id = only_page(
        pipeline, site, books_spec, f"/_test/retry-after/c?seconds={seconds:g}&form={form}", retry_times=3
    )
    first = pipeline.receive(10)
    assert pipeline.deliver(first) == {first[0].id}

    assert site.stats.count("/_test/retry-after/c") == 1  # not slept through in process
    [(receipt, seconds)] = pipeline.visibility_changes
    assert receipt == first[0].receipt
    [returned] = logs.named("message returned to the queue")
    asked = float(re.search(r"Retry-After ([0-9.]+)s", returned["reason"]).group(1))  # type: ignore[union-attr]
    assert asked > IN_PROCESS_WAIT_CAP_S
    assert seconds >= asked
    assert pipeline.receive(10) == []  # invisible now
    assert pipeline.in_queue() == 1
    assert pipeline.tally(CRAWL, run_id).done == 0

    [paused] = pipeline.hosts.load([f"127.0.0.1:{site.port}"]).values()  # the pause is the fleet's, not one fetcher's
    assert paused.paused_until >= pipeline.clock() + asked - 2  # in the pipeline's time

    pipeline.make_visible(first)  # ... as it will be once the Retry-After has passed
    pipeline.let_pauses_pass(f"127.0.0.1:{site.port}")
    assert pipeline.deliver(pipeline.receive(10)) == set()
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched, t.failed) == (1, 1, 0)
    assert site.stats.count("/_test/retry-after/c") == 2


def test_404_is_counted_failed_once_and_not_retried(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, logs: Logs
) -> None:
    run_id = only_page(pipeline, site, books_spec, "/_test/status/404", retry_times=3)
    batch = pipeline.receive(10)

    assert pipeline.deliver(batch) == set()  # acknowledged: a permanent failure is an outcome, not an error
    assert site.stats.count("/_test/status/404") == 1
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.failed, t.fetched, t.gone) == (1, 1, 0, 1)
    assert t.failures.top() == {"http 404": 1}
    assert pipeline.visibility_changes == []
    assert pipeline.in_queue() == 0
    assert [e["url"] for e in logs.named("page failed")] == [f"{site.base_url}/_test/status/404"]


@pytest.mark.parametrize("retry_after", [0.2, 6.4, 7.0, 59.5])
@pytest.mark.parametrize("receive_count", [1, 3])
def test_visibility_backoff_is_never_below_the_retry_after(retry_after: float, receive_count: int) -> None:
    rng = random.Random(7)
    for _ in range(50):
        delay = visibility_backoff(receive_count, retry_after, rng, base=10.0, cap=900.0)
        assert isinstance(delay, int)
        assert delay >= retry_after


def _until(year: int) -> float:
    return datetime(year, 1, 1, tzinfo=UTC).timestamp() - time.time()


@pytest.mark.parametrize(
    ("form", "seconds"),
    [("delta", 999_999_999.0), ("date", _until(2100)), ("date", _until(9999))],
    ids=["delta-999999999", "date-2100", "date-9999"],
)
def test_a_retry_after_from_the_far_future_blocks_the_host_for_the_run_and_saves_no_pause(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, form: str, seconds: float
) -> None:
    """Main paused the host for decades and saved it; the next crawl of the host waited on robots.txt, silently."""
    host = f"127.0.0.1:{site.port}"
    pipeline.spec(
        books_spec(CRAWL, site.base_url, pages=0, urls=[f"/_test/retry-after/far?seconds={seconds:.0f}&form={form}"])
    )
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    [(reason, n)] = summary["skips"].items()
    assert n == 1
    assert reason.startswith(f"host {host} blocked: asked to pause for ")
    assert f"more than the {MAX_PAUSE_S:.0f} s it may" in reason
    assert summary["blocked_hosts"][host]["urls_skipped"] == 1
    check = {c["check"]: c for c in summary["verdict"]["checks"]}["blocked"]
    assert check["ok"] is False
    [state] = pipeline.hosts.load([host]).values()
    assert state.paused_until < pipeline.clock() + MAX_PAUSE_S  # no pause of decades is saved for the next run


def test_a_pause_saved_past_the_cap_blocks_the_host_with_the_reason_instead_of_hanging_the_next_run(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """A host record an older fetcher saved paused until 2058: the run ends, its pages skipped with the reason, and
    the record is repaired (main's next run sent no request and waited on robots.txt past any test's patience)."""
    host = f"127.0.0.1:{site.port}"
    book = pipeline.hosts
    book.save([HostState(host, paused_until=pipeline.clock() + 999_999_958.9, version=0)])
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=2))

    run_id = pipeline.run(CRAWL)

    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.skipped) == (2, 2)
    assert site.stats.count("/catalogue/page-1.html") == 0
    [reason] = pipeline.summary(CRAWL, run_id)["skips"]
    assert reason.startswith(f"host {host} blocked: asked to pause for ")
    [state] = book.load([host]).values()
    assert state.paused_until < pipeline.clock() + MAX_PAUSE_S

"""Finalize shards on both adapter sets: a shard that dies is retried and counted once, a shard past its
retries or a run too large ends the run failed with the reason, and no run stays finalizing forever.

Runs are synthetic (``sluice_tools.synthetic``: page results and parts written straight through the
pipeline's own ports, the ledger on DynamoDB or SQLite), finalized by 8 shards: the AWS harness
delivers the shard queue's tasks to the real finalizer handler, the local one runs them on the
finalizer's thread pool.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from sluice.adapters.aws.shardtasks import SqsShardTasks
from sluice.domain.layout import summary_key
from sluice.domain.runs import RunState
from sluice.messages import UrlTask
from sluice.pipeline.finalize import driver as finalize
from sluice.pipeline.finalize import shards as finalize_shards
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.finalize.output import load_index
from sluice.pipeline.finalize.shards import Attempt
from sluice.pipeline.services import Services
from sluice.spec import CrawlSpec
from sluice_tools import synthetic

from .conftest import AwsHarness, Pipeline, PipelineOn

PAGES = 60
SHARD_PAGES = 8  # 60 pages: 8 shards


class Killed(BaseException):
    """An invocation that died (its timeout, its memory): nothing below it gets to handle it."""


@pytest.fixture
def run_id(pipeline: Pipeline) -> str:
    pipeline.configure(finalize_shard_pages=SHARD_PAGES)
    synthetic.write_spec(pipeline.specs_dir)
    return synthetic.write_run(pipeline.services, PAGES)


@contextmanager
def failing(in_phase: str, shard: int, times: int, error: type[BaseException] = RuntimeError) -> Iterator[list[int]]:
    """Make one shard task of one phase fail ``times`` times, after doing its work (it dies mid-way)."""
    real = finalize_shards.run_task
    calls: list[int] = []

    def run_task(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt, phase: str, index: int) -> None:
        real(services, run, spec, attempt, phase, index)
        if (phase, index) == (in_phase, shard):
            calls.append(index)
            if len(calls) <= times:
                raise error(f"shard {index} died after its work")

    finalize.run_task = run_task  # type: ignore[attr-defined]  # patched where finalize calls it
    try:
        yield calls
    finally:
        finalize.run_task = real  # type: ignore[attr-defined]


def _clean(pipeline: Pipeline, run_id: str) -> tuple[dict[str, Any], list[str]]:
    summary = pipeline.summary(synthetic.CRAWL, run_id)
    for volatile in ("finalized_at", "finalize_s", "cost"):
        summary.pop(volatile)
    return summary, sorted(json.dumps(r, sort_keys=True) for r in pipeline.records(synthetic.CRAWL, run_id))


def test_a_shard_that_dies_mid_way_is_retried_and_counted_once(pipeline: Pipeline, run_id: str) -> None:
    with failing("write", 3, times=1) as calls:
        [done] = pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": run_id})
    assert calls == [3, 3]  # its work done twice: the retry rewrote its result whole

    summary, records = _clean(pipeline, run_id)
    assert done["healthy"] is True
    assert summary["finalize_shards"] == 8
    assert summary["pages"]["fetched"] + summary["pages"]["failed"] + summary["pages"]["skipped"] == PAGES
    keys = [json.loads(r)["_key"] for r in records]
    assert len(keys) == len(set(keys)) == summary["records"]["total"]  # every key once, nothing doubled
    # The same run finalized again (forced), with no failure: the same summary and the same lines.
    again = pipeline.run_state(synthetic.CRAWL, run_id)
    assert again.status == "finished"
    second = synthetic.write_run(pipeline.services, PAGES)
    pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": second})
    other, other_records = _clean(pipeline, second)
    assert other_records == records
    for field in ("pages", "records", "failures", "skips", "null_rates", "outputs"):
        if field == "outputs":
            assert other[field]["bytes"] == summary[field]["bytes"]
        else:
            assert other[field] == summary[field], field


def test_a_shard_past_its_retries_ends_the_run_failed_with_the_reason(
    pipeline: Pipeline, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with failing("scan", 5, times=1000) as calls:
        [done] = pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": run_id})

    assert len(calls) == pipeline.max_receive_count  # each receive of its task, then no more
    assert done["healthy"] is False
    summary = pipeline.summary(synthetic.CRAWL, run_id)
    assert summary["status"] == "failed"
    assert summary["failed"].startswith("finalize shard 5 of 8 (scan) failed")
    assert "shard 5 died after its work" in summary["failed"]
    run = pipeline.run_state(synthetic.CRAWL, run_id)
    assert (run.status, run.healthy, run.complete) == ("finished", False, False)
    assert pipeline.services.ledger.active_run(synthetic.CRAWL) is None  # the lock is released
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [d["RunFailed"] for d in documents] == [[1.0]]  # the run-failed alarm's metric


def test_a_run_too_large_for_the_stack_ends_failed_saying_what_to_raise(pipeline: Pipeline, run_id: str) -> None:
    pipeline.configure(finalize_max_shards=4)

    [done] = pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": run_id})

    assert done["healthy"] is False
    reason = pipeline.summary(synthetic.CRAWL, run_id)["failed"]
    assert "60 pages need 8 finalize shards" in reason
    assert "finalize_max_shards" in reason
    assert pipeline.run_state(synthetic.CRAWL, run_id).status == "finished"


def test_a_run_never_stays_finalizing_forever(pipeline: Pipeline, run_id: str) -> None:
    """Every attempt dies (its tasks killed, or never delivered); the attempt after the last ends the run failed."""
    assert pipeline.services.ledger.begin_finalizing(synthetic.CRAWL, run_id)
    attempts = pipeline.services.tuning.finalize_attempts
    with failing("scan", 0, times=1000, error=Killed):
        for _ in range(attempts):  # what the sweep does every 20 minutes, forced here
            with suppress(Killed):
                assert finalize_run(synthetic.CRAWL, run_id, pipeline.services, force=True) is None
            assert pipeline.run_state(synthetic.CRAWL, run_id).status == "finalizing"
        done = finalize_run(synthetic.CRAWL, run_id, pipeline.services, force=True)

    assert done is not None
    assert done.summary.status == "failed"
    assert f"finalizing did not complete in {attempts} attempts" in (done.summary.failed or "")
    assert pipeline.services.objects.get(summary_key(synthetic.CRAWL, run_id)) is not None
    assert pipeline.run_state(synthetic.CRAWL, run_id).status == "finished"


def test_a_shard_task_delivered_twice_is_counted_once(
    aws_pipeline: PipelineOn[AwsHarness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQS delivers at least once: every task of every phase sent twice still makes one summary, every key once."""
    aws_pipeline.configure(finalize_shard_pages=SHARD_PAGES)
    synthetic.write_spec(aws_pipeline.specs_dir)
    once = synthetic.write_run(aws_pipeline.services, PAGES)
    aws_pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": once})
    expected = _clean(aws_pipeline, once)
    real = SqsShardTasks.start
    monkeypatch.setattr(SqsShardTasks, "start", lambda self, a, p: (real(self, a, p), real(self, a, p))[0])
    twice = synthetic.write_run(aws_pipeline.services, PAGES)

    finalized = aws_pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": twice})

    assert [f["run_id"] for f in finalized] == [twice]  # combined once
    summary, records = _clean(aws_pipeline, twice)
    assert records == expected[1]
    for field in ("pages", "records", "failures", "skips", "null_rates", "finalize_shards"):
        assert summary[field] == expected[0][field], field


def test_each_part_is_read_once_and_the_merged_index_is_in_hash_order(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write tasks are keyed by part, not URL shard: a fetcher batch's part, whose pages fall in every shard, is
    read by one task in one range (keyed by URL shard it was read once per shard its pages fall in). The groups'
    page-index rows, merged by the combine, are the run's index: every page with records once, in hash order."""
    pipeline.configure(finalize_shard_pages=40)
    synthetic.write_spec(pipeline.specs_dir)
    pages = 3 * synthetic.PAGES_PER_PART  # three parts, each over all 8 shards' ranges
    run = synthetic.write_run(pipeline.services, pages)
    objects = type(pipeline.services.objects)
    reads: Counter[str] = Counter()
    real_get, real_range = objects.get, objects.get_range

    def get(self: Any, key: str) -> bytes | None:
        if "/parts/" in key:
            reads[key] += 1
        return real_get(self, key)

    def get_range(self: Any, key: str, start: int, length: int) -> bytes:
        if "/parts/" in key:
            reads[key] += 1
        return real_range(self, key, start, length)

    monkeypatch.setattr(objects, "get", get)
    monkeypatch.setattr(objects, "get_range", get_range)

    [done] = pipeline.finalize_one({"crawl": synthetic.CRAWL, "run_id": run})

    summary = pipeline.summary(synthetic.CRAWL, run)
    assert done["healthy"] is True
    assert summary["finalize_shards"] == 8
    assert sorted(reads.values()) == [1, 1, 1]  # each part once
    index = load_index(pipeline.services.objects, synthetic.CRAWL, run)
    numbers = list(index.numbers)
    assert numbers == sorted(set(numbers))
    assert len(numbers) == len({r["_page"] for r in pipeline.records(synthetic.CRAWL, run)}) > 200


def test_waiting_links_are_sent_again_a_bounded_share_of_shards_a_call(
    pipeline: Pipeline, run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stalled run's waiting links are read shard by shard: a call stops after its budget of entries (the
    sweep's bound, whatever the run's size), the next starts where it stopped, and a lap sends every one."""
    links = [UrlTask(url=f"{synthetic.page_url(0)}/waiting/{n}", depth=1, origin="link") for n in range(40)]
    pipeline.services.frontier.claim(run_id, links, seeds=PAGES, max_pages=1_000)
    sent: list[list[str]] = []
    queue = type(pipeline.services.queue)
    monkeypatch.setattr(queue, "send", lambda self, crawl, run, tasks: sent.append([t.url for t in tasks]))

    for _ in range(8):  # 8 shards, at least one read a call
        finalize.revive_waiting(pipeline.services, synthetic.CRAWL, run_id, shards=8, budget=1)

    assert 1 < len(sent) <= 8  # several calls, each a share of the shards
    assert all(len(batch) < len(links) for batch in sent)
    assert sorted(url for batch in sent for url in batch) == sorted(t.url for t in links)  # a lap: every one once
    sent.clear()
    assert finalize.revive_waiting(pipeline.services, synthetic.CRAWL, run_id, shards=8, budget=None) == len(links)
    assert sorted(sent[0]) == sorted(t.url for t in links)

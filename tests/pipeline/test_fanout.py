"""The scheduler's fan-out: no per-URL writes at all, a constant few requests per 1,000 URLs, continuation in chunks."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.queue import SqsQueue
from sluice.domain.runs import RunInFlight
from sluice.handlers import scheduler
from sluice.messages import StartEvent
from sluice.pipeline.start import fanout as start
from sluice.pipeline.start.catalogplan import plan_key
from sluice.pipeline.start.fanout import start_run
from sluice.spec import SpecError, parse_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.context import LocalContext

from .conftest import AwsHarness, Pipeline, PipelineOn, SpecData


def seeds_spec(name: str, count: int) -> dict[str, Any]:
    """``count`` template seeds on a port nothing listens on: the scheduler enqueues them, nothing fetches them."""
    return {
        "name": name,
        "seeds": {"template": "http://127.0.0.1:9/item/{n}.html", "range": {"start": 1, "stop": count}},
        "follow": {"max_pages": 100_000},
        "extract": {"fields": {"title": "h1::text"}},
    }


class Calls:
    """AWS API calls by (service, operation), seen through botocore's own event hooks."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        for service in ("sqs", "dynamodb", "s3"):
            client(service).meta.events.register(f"before-parameter-build.{service}", self._hook)

    def _hook(self, model: Any, **_: Any) -> None:
        self.seen[f"{model.service_model.service_name}.{model.name}"] += 1

    def take(self) -> Counter[str]:
        seen, self.seen = self.seen, Counter()
        return seen


def queued_urls(pipeline: Pipeline, limit: int) -> Counter[str]:
    """Every URL in the queue, each message received once and deleted (a FIFO group gives nothing more while
    one of its messages is in flight)."""
    urls: Counter[str] = Counter()
    for _ in range(limit // 10 + 2):
        batch = pipeline.receive(10)
        if not batch:
            break
        for message in batch:
            urls.update(task["url"] for task in json.loads(message.body)["tasks"])
        pipeline.ack(batch)
    return urls


def test_fanout_writes_nothing_per_url_and_ten_sqs_requests_per_1000_urls_at_any_size(
    aws_pipeline: PipelineOn[AwsHarness], monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = aws_pipeline
    # The fan-out also records its progress every RECORD_EVERY_S of wall time: a write per 5 s, not
    # per URL, but on a loaded machine the larger run crosses 5 s and makes one more. This test is
    # about per-URL writes, so the timer is put out of reach (the resume test below sets it to 0).
    monkeypatch.setattr(start, "RECORD_EVERY_S", 3600.0)
    pipeline.configure(host_backlog_messages=0)  # one host: every seed straight to the queue, as before the cap
    calls = Calls()
    per_size: dict[int, Counter[str]] = {}
    for size in (1_000, 4_000):
        name = f"fanout-{size}"
        pipeline.spec(seeds_spec(name, size))
        calls.take()
        answer = scheduler.handler({"crawl": name}, LocalContext(function_name="scheduler", timeout_s=900))  # type: ignore[arg-type]
        per_size[size] = calls.take()
        assert (answer["complete"], answer["enqueued"], answer["total"]) == (True, size, size)
        run = pipeline.run_state(name, answer["run_id"])
        assert (run.seeds, run.seeding) == (size, False)

    small, large = per_size[1_000], per_size[4_000]
    for size, seen in per_size.items():
        assert seen["sqs.SendMessageBatch"] == 10 * size // 1_000
        assert seen["s3.PutObject"] == 1  # the seed set, before any seed is sent
        assert seen["dynamodb.TransactWriteItems"] == 1  # the lock and the run, once
    # Nothing but the queue grows with the seeds: DynamoDB and S3 calls are a constant per run.
    fixed = {k: v for k, v in small.items() if k != "sqs.SendMessageBatch"}
    assert fixed == {k: v for k, v in large.items() if k != "sqs.SendMessageBatch"}
    assert sum(v for k, v in large.items() if k.startswith("dynamodb.")) <= 12
    queue = pipeline.services.queue
    assert isinstance(queue, SqsQueue)
    assert queue.stats.messages == pipeline.in_queue() == 500


def test_fanout_continues_from_its_offset_when_time_runs_low(pipeline: Pipeline) -> None:
    pipeline.configure(host_backlog_messages=0)
    size = 1_500
    pipeline.spec(seeds_spec("big", size))

    first = start_run(StartEvent(crawl="big"), pipeline.services, time_left=lambda: 0.0)
    assert (first.complete, first.offset, first.enqueued, first.total) == (False, start.CHUNK, start.CHUNK, size)
    assert pipeline.start_requests == [{"crawl": "big", "run_id": first.run_id, "offset": start.CHUNK}]
    assert pipeline.run_state("big", first.run_id).seeding is True

    # The continuation arrives as the scheduler's own event (Lambda's async invoke).
    continuation = StartEvent.model_validate(pipeline.start_requests.pop())
    answer = start_run(continuation, pipeline.services, time_left=lambda: 900.0)
    assert (answer.complete, answer.offset, answer.enqueued) == (True, size, size - start.CHUNK)
    assert pipeline.start_requests == []

    run = pipeline.run_state("big", first.run_id)
    assert (run.seeds, run.seeding, run.fanned_out) == (size, False, size)
    urls = queued_urls(pipeline, size)
    assert len(urls) == size
    assert set(urls.values()) == {1}


def test_retried_continuation_sends_seeds_again_and_the_run_still_counts_each_once(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(start, "CHUNK", 10)
    pipeline.configure(host_backlog_messages=0)
    size = 25
    pipeline.spec(seeds_spec("retried", size))
    first = start_run(StartEvent(crawl="retried"), pipeline.services, time_left=lambda: 0.0)
    continuation = StartEvent.model_validate(pipeline.start_requests.pop())
    for _ in range(2):  # Lambda retries an async invoke that seemed to fail
        again = start_run(continuation, pipeline.services, time_left=lambda: 900.0)
        assert again.complete is True
    assert pipeline.run_state("retried", first.run_id).seeds == size
    assert set(queued_urls(pipeline, 2 * size)) == {f"http://127.0.0.1:9/item/{n}.html" for n in range(1, size + 1)}


def test_run_is_not_finalized_while_its_fan_out_still_continues(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetchers that catch up with a fan-out (its continuation throttled or retried) must not end the run early."""
    monkeypatch.setattr(start, "CHUNK", 2)
    pipeline.spec(books_spec("books", site.base_url))
    answer = start_run(StartEvent(crawl="books"), pipeline.services, time_left=lambda: 0.0)
    run_id = answer.run_id
    assert (answer.complete, answer.enqueued) == (False, 2)

    pipeline.drain()  # the first two pages are done before the continuation runs
    assert pipeline.tally("books", run_id).done == 2
    pipeline.finalize()
    assert pipeline.run_state("books", run_id).status == "running"

    for _ in range(5):
        if not pipeline.start_requests:
            break
        event = StartEvent.model_validate(pipeline.start_requests.pop(0))
        start_run(event, pipeline.services, time_left=lambda: 0.0)
        pipeline.drain()
    assert [f["run_id"] for f in pipeline.finalize()] == [run_id]
    summary = pipeline.summary("books", run_id)
    assert (summary["status"], summary["pages"]["fetched"], summary["records"]["total"]) == ("finished", 5, 100)
    assert summary["verdict"]["healthy"] is True


def test_retried_start_that_died_mid_fan_out_resumes_its_own_run(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda retries a failed start with the same event: it must resume the run it opened, not be refused by it."""
    monkeypatch.setattr(start, "CHUNK", 10)
    monkeypatch.setattr(start, "RECORD_EVERY_S", 0.0)
    pipeline.configure(host_backlog_messages=0)  # (a capped fan-out records where it got only when it hands over)
    size = 25
    pipeline.spec(seeds_spec("resumed", size))
    queue = pipeline.services.queue
    real_send = queue.send
    sends = [0]

    def dies_on_second_send(*args: Any, **kwargs: Any) -> int:
        sends[0] += 1
        if sends[0] == 2:
            raise ConnectionError("the scheduler died sending its second chunk")
        return int(real_send(*args, **kwargs))

    monkeypatch.setattr(queue, "send", dies_on_second_send)
    event = StartEvent(crawl="resumed", trigger="event-1")
    with pytest.raises(ConnectionError):
        start_run(event, pipeline.services, time_left=lambda: 900.0)
    lock = pipeline.services.ledger.active_run("resumed")
    assert lock is not None
    assert pipeline.run_state("resumed", lock.run_id).fanned_out == 10

    again = start_run(event, pipeline.services, time_left=lambda: 900.0)

    assert (again.run_id, again.complete, again.enqueued) == (lock.run_id, True, size - 10)  # from where it got to
    assert pipeline.run_state("resumed", again.run_id).seeds == size
    assert set(queued_urls(pipeline, 2 * size)) == {f"http://127.0.0.1:9/item/{n}.html" for n in range(1, size + 1)}
    with pytest.raises(RunInFlight, match=again.run_id):
        start_run(StartEvent(crawl="resumed", trigger="event-2"), pipeline.services, time_left=lambda: 900.0)


def test_seeds_beyond_max_pages_are_refused_by_the_spec() -> None:
    data = seeds_spec("capped", 25)
    data["follow"]["max_pages"] = 7
    with pytest.raises(SpecError, match=r"25 seed URLs is more than follow\.max_pages"):
        parse_spec(data)


def test_max_pages_caps_the_links_a_run_claims(pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData) -> None:
    pipeline.spec(
        books_spec("capped", site.base_url, pages=0, urls=["/catalogue/page-1.html"], max_depth=10, max_pages=3)
    )
    run_id = pipeline.run("capped")
    t = pipeline.tally("capped", run_id)
    assert (t.seeds, t.links, t.done, t.pending) == (1, 2, 3, 0)
    assert pipeline.summary("capped", run_id)["records"]["total"] == 60


class CatalogQueries:
    """The Query calls that read a run's URL entries, by the partition they read (botocore's own event hooks)."""

    def __init__(self, run_id: str) -> None:
        self.prefix = f"url#{run_id}#"
        self.partitions: Counter[str] = Counter()
        client("dynamodb").meta.events.register("provide-client-params.dynamodb.Query", self._hook)

    def _hook(self, params: dict[str, Any], **_: Any) -> None:
        partition = params.get("ExpressionAttributeValues", {}).get(":p", {}).get("S", "")
        if partition.startswith(self.prefix):
            self.partitions[partition] += 1

    def close(self) -> None:
        client("dynamodb").meta.events.unregister("provide-client-params.dynamodb.Query", self._hook)


def test_a_nightly_fan_out_reads_its_catalog_from_dynamodb_once_and_sends_every_page_with_its_prior(
    aws_pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    pipeline = aws_pipeline
    pipeline.configure(host_backlog_messages=0)
    site.set_catalogue(books=600)  # 30 listing pages of 20 books
    pipeline.spec(books_spec("catalog-once", site.base_url, pages=30))
    catalog = pipeline.run("catalog-once")
    queries = CatalogQueries(catalog)
    try:
        answer = scheduler.handler({"crawl": "catalog-once"}, LocalContext(function_name="scheduler", timeout_s=900))  # type: ignore[arg-type]
    finally:
        queries.close()
    assert answer["catalog_run"] == catalog
    # Its seed set and its sends from one scan: each of the catalog's 16 partitions read once (a page each here).
    assert sorted(queries.partitions) == [f"url#{catalog}#{p:x}" for p in range(16)]
    assert set(queries.partitions.values()) == {1}
    tasks = [task for message in pipeline.receive(10) for task in json.loads(message.body)["tasks"]]
    assert len(tasks) == answer["total"] == 30
    assert all(task["prior"]["n"] == 20 for task in tasks)


@pytest.mark.parametrize("plan_stored", [True, False], ids=["stored-plan", "begun-before-plans-were-stored"])
def test_a_nightly_fan_out_continued_sends_each_catalog_page_once(
    aws_pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch, plan_stored: bool
) -> None:
    pipeline = aws_pipeline
    monkeypatch.setattr(start, "CHUNK", 7)
    pipeline.configure(host_backlog_messages=0)
    site.set_catalogue(books=600)
    pipeline.spec(books_spec("catalog-continued", site.base_url, pages=30))
    pipeline.run("catalog-continued")
    first = start_run(StartEvent(crawl="catalog-continued"), pipeline.services, time_left=lambda: 0.0)
    assert (first.complete, first.offset) == (False, 7)
    if not plan_stored:  # a fan-out an older scheduler began: its continuation scans the catalog as that one did
        pipeline.services.objects.delete(plan_key("catalog-continued", first.run_id, "a", 0))
    continuation = StartEvent.model_validate(pipeline.start_requests.pop())
    answer = start_run(continuation, pipeline.services, time_left=lambda: 900.0)
    assert (answer.complete, answer.offset, answer.enqueued) == (True, 30, 23)
    urls = queued_urls(pipeline, 60)
    assert set(urls) == {f"{site.base_url}/catalogue/page-{n}.html" for n in range(1, 31)}
    assert set(urls.values()) == {1}


@pytest.mark.parametrize("kept", [start.INLINE_KEPT, 100])
def test_a_start_canonicalizes_each_inline_seed_once_when_the_plan_keeps_them(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """The plan walks its inline seeds for its own seed set, the run's seed set and the tasks: it keeps them
    canonical from the first walk (up to ``INLINE_KEPT``), and makes them again each walk past that."""
    pipeline.configure(host_backlog_messages=0)
    size = 300
    pipeline.spec(seeds_spec("canon", size))
    monkeypatch.setattr(start, "INLINE_KEPT", kept)
    made: Counter[str] = Counter()
    from sluice.extraction.urls import canonicalize_url as canonical

    def counted(url: str) -> str:
        made[url] += 1
        return canonical(url)

    monkeypatch.setattr(start, "canonicalize_url", counted)
    answer = start_run(StartEvent(crawl="canon"), pipeline.services, time_left=lambda: 900.0)
    assert (answer.complete, answer.total, answer.enqueued) == (True, size, size)
    assert len(made) == size
    assert set(made.values()) == ({1} if kept >= size else {3})
    urls = queued_urls(pipeline, size)
    assert urls == Counter(canonical(f"http://127.0.0.1:9/item/{n}.html") for n in range(1, size + 1))

"""The scheduler's fan-out: requests per URL that stay constant as a run grows, and continuation in chunks."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models.table import Table

from sluice.aws.clients import client
from sluice.aws.ledger import RunInFlight
from sluice.handlers import scheduler
from sluice.messages import StartEvent
from sluice.pipeline import start
from sluice.pipeline.start import start_run
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.context import LocalContext


@pytest.fixture
def fast_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip moto's per-item table backups in transactions, failing the test if one was ever needed.

    moto deep-copies the whole table once per item of every TransactWriteItems (100 copies of the
    growing ledger per claim transaction): 1,000 seeds take half a minute and 4,000 take hours.
    The backup only serves a rollback; the fan-outs here claim fresh URLs, so no transaction fails,
    and if one does the test fails instead of silently keeping a partial write.
    """
    real = dynamodb_models.DynamoDBBackend.transact_write_items

    class NoTableBackup:
        def __getattr__(self, name: str) -> Any:
            return getattr(copy, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        try:
            real(self, transact_items)
        except Exception as exc:
            raise AssertionError(f"a transaction failed and moto's rollback was skipped: {exc!r}") from exc

    monkeypatch.setattr(dynamodb_models, "copy", NoTableBackup())
    monkeypatch.setattr(dynamodb_models.DynamoDBBackend, "transact_write_items", transact_write_items)


def seeds_spec(name: str, count: int) -> dict[str, Any]:
    """``count`` template seeds on a port nothing listens on: the scheduler enqueues them, nothing fetches them."""
    return {
        "name": name,
        "seeds": {"template": "http://127.0.0.1:9/item/{n}.html", "range": {"start": 1, "stop": count}},
        "follow": {"max_pages": 100_000},
        "extract": {"fields": {"title": "h1::text"}},
    }


class Calls:
    """AWS API calls by (service, operation); a DynamoDB transaction that takes a crawl's lock counts apart."""

    def __init__(self, pipeline: Any) -> None:
        self.seen: Counter[str] = Counter()
        self.largest_transaction = 0
        for service in ("sqs", "dynamodb", "s3"):
            client(service).meta.events.register(f"before-parameter-build.{service}", self._hook)

    def _hook(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = f"{model.service_model.service_name}.{model.name}"
        if model.name == "TransactWriteItems":
            items = params["TransactItems"]
            self.largest_transaction = max(self.largest_transaction, len(items))
            opens = any(i.get("Put", {}).get("Item", {}).get("pk") == {"S": "active"} for i in items)
            name += ":open-run" if opens else ":claim"
        self.seen[name] += 1

    def take(self) -> Counter[str]:
        seen, self.seen = self.seen, Counter()
        return seen


def queued_urls(pipeline: Any, limit: int) -> Counter[str]:
    """Every URL in the queue (each message received once and left in flight)."""
    urls: Counter[str] = Counter()
    for _ in range(limit // 10 + 2):
        batch = pipeline.receive(10)
        if not batch:
            break
        for message in batch:
            urls.update(task["url"] for task in json.loads(message["Body"])["tasks"])
    return urls


@pytest.mark.usefixtures("fast_transactions")
def test_fanout_costs_ten_sqs_requests_and_eleven_transactions_per_1000_urls_at_any_size(pipeline: Any) -> None:
    calls = Calls(pipeline)
    per_size: dict[int, Counter[str]] = {}
    for size in (1_000, 4_000):
        name = f"fanout-{size}"
        pipeline.spec(seeds_spec(name, size))
        calls.take()
        answer = scheduler.handler({"crawl": name}, LocalContext(function_name="scheduler", timeout_s=900))  # type: ignore[arg-type]
        per_size[size] = calls.take()
        assert (answer["complete"], answer["enqueued"], answer["total"]) == (True, size, size)
        run = pipeline.run_state(name, answer["run_id"])
        assert (run.counters["enqueued"], run.pending) == (size, size)

    small, large = per_size[1_000], per_size[4_000]
    for size, seen in per_size.items():
        thousands = size // 1_000
        assert seen["sqs.SendMessageBatch"] == 10 * thousands
        assert seen["dynamodb.TransactWriteItems:claim"] == 11 * thousands  # 99 claims + the counter per transaction
        assert seen["dynamodb.TransactWriteItems:open-run"] == 1
    assert calls.largest_transaction <= 100
    # Requests that scale with URLs are linear; the rest is a small constant per run.
    fixed = {k: v for k, v in small.items() if k not in ("sqs.SendMessageBatch", "dynamodb.TransactWriteItems:claim")}
    assert fixed == {k: v for k, v in large.items() if k in fixed}
    assert set(large) == set(small)
    per_url_small = small.total() - sum(fixed.values())
    per_url_large = large.total() - sum(fixed.values())
    assert abs(per_url_large - 4 * per_url_small) <= 1
    assert pipeline.services.queue.stats.messages == pipeline.in_queue() == 500


@pytest.mark.usefixtures("fast_transactions")
def test_fanout_continues_from_its_offset_when_time_runs_low(pipeline: Any) -> None:
    size = 1_500
    pipeline.spec(seeds_spec("big", size))

    first = start_run(StartEvent(crawl="big"), pipeline.services, time_left=lambda: 0.0)
    assert (first.complete, first.offset, first.enqueued, first.total) == (False, start.CHUNK, start.CHUNK, size)
    assert pipeline.start_requests == [{"crawl": "big", "run_id": first.run_id, "offset": start.CHUNK}]

    # The continuation arrives as the scheduler's own event (Lambda's async invoke).
    answer = scheduler.handler(
        pipeline.start_requests.pop(),
        LocalContext(function_name="scheduler", timeout_s=900),  # type: ignore[arg-type]
    )
    assert (answer["complete"], answer["offset"], answer["enqueued"]) == (True, size, size - start.CHUNK)
    assert pipeline.start_requests == []

    run = pipeline.run_state("big", first.run_id)
    assert run.counters["enqueued"] == size
    urls = queued_urls(pipeline, size)
    assert len(urls) == size
    assert set(urls.values()) == {1}


def test_retried_continuation_counts_no_seed_twice(pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start, "CHUNK", 10)  # small: a retry's claims fail, and moto's rollback is slow
    size = 25
    pipeline.spec(seeds_spec("retried", size))
    first = start_run(StartEvent(crawl="retried"), pipeline.services, time_left=lambda: 0.0)
    continuation = StartEvent.model_validate(pipeline.start_requests.pop())
    for _ in range(2):  # Lambda retries an async invoke that seemed to fail
        again = start_run(continuation, pipeline.services, time_left=lambda: 900.0)
        assert again.complete is True
    assert pipeline.run_state("retried", first.run_id).counters["enqueued"] == size
    assert set(queued_urls(pipeline, 2 * size)) == {f"http://127.0.0.1:9/item/{n}.html" for n in range(1, size + 1)}


def test_run_is_not_finalized_while_its_fan_out_still_continues(
    pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fetchers that catch up with a fan-out (its continuation throttled or retried) must not end the run early."""
    monkeypatch.setattr(start, "CHUNK", 2)
    pipeline.spec(books_spec("books", site.base_url))
    short = LocalContext(function_name="scheduler", timeout_s=1)  # under the safety margin: one chunk per call
    answer = scheduler.handler({"crawl": "books"}, short)  # type: ignore[arg-type]
    run_id = answer["run_id"]
    assert (answer["complete"], answer["enqueued"]) == (False, 2)

    pipeline.drain()  # the first two pages are done before the continuation runs
    assert pipeline.run_state("books", run_id).pending == 0
    pipeline.finalize()
    assert pipeline.run_state("books", run_id).status == "running"

    for _ in range(5):
        if not pipeline.start_requests:
            break
        scheduler.handler(pipeline.start_requests.pop(0), short)  # type: ignore[arg-type]
        pipeline.drain()
    assert [f["run_id"] for f in pipeline.finalize()] == [run_id]
    summary = pipeline.summary("books", run_id)
    assert (summary["status"], summary["pages"]["fetched"], summary["records"]["total"]) == ("finished", 5, 100)
    assert summary["verdict"]["healthy"] is True


def test_retried_start_that_died_mid_fan_out_resumes_its_own_run(
    pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda retries a failed start with the same event: it must resume the run it opened, not be refused by it."""
    monkeypatch.setattr(start, "CHUNK", 10)
    size = 25
    pipeline.spec(seeds_spec("resumed", size))
    queue = pipeline.services.queue
    real_send = queue.send
    sends = [0]

    def dies_on_second_send(*args: Any, **kwargs: Any) -> int:
        sends[0] += 1
        if sends[0] == 2:
            raise ConnectionError("the scheduler died after claiming its second chunk")
        return int(real_send(*args, **kwargs))

    monkeypatch.setattr(queue, "send", dies_on_second_send)
    event = StartEvent(crawl="resumed", trigger="event-1")
    with pytest.raises(ConnectionError):
        start_run(event, pipeline.services, time_left=lambda: 900.0)
    lock = pipeline.services.ledger.active_run("resumed")
    assert lock is not None

    again = start_run(event, pipeline.services, time_left=lambda: 900.0)

    assert (again.run_id, again.complete) == (lock["run_id"], True)
    assert pipeline.run_state("resumed", again.run_id).counters["enqueued"] == size
    assert set(queued_urls(pipeline, 2 * size)) == {f"http://127.0.0.1:9/item/{n}.html" for n in range(1, size + 1)}
    with pytest.raises(RunInFlight, match=again.run_id):
        start_run(StartEvent(crawl="resumed", trigger="event-2"), pipeline.services, time_left=lambda: 900.0)


def test_max_pages_caps_what_a_run_enqueues(pipeline: Any) -> None:
    data = seeds_spec("capped", 25)
    data["follow"]["max_pages"] = 7
    pipeline.spec(data)
    result = start_run(StartEvent(crawl="capped"), pipeline.services, time_left=lambda: 900.0)
    assert (result.complete, result.enqueued) == (True, 7)
    assert pipeline.run_state("capped", result.run_id).counters["enqueued"] == 7
    assert sum(queued_urls(pipeline, 30).values()) == 7

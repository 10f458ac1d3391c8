"""Poison messages: each fails alone, reaches the dead-letter queue after the queue's maximum receives, and says why."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter
from typing import Any

import pytest

from sluice.handlers import fetcher
from sluice_tools.demosite import RunningDemoSite

from .conftest import AwsHarness, Logs, Message, Pipeline, PipelineOn, SpecData

CRAWL = "books"
NOT_JSON = "not json"
MISSING_FIELDS = json.dumps({"v": 2, "crawl": CRAWL})
NO_SUCH_RUN = json.dumps(
    {"v": 2, "crawl": CRAWL, "run_id": "20200101T000000Z-000000", "tasks": [{"url": "http://127.0.0.1:9/x.html"}]}
)


def test_poison_messages_reach_the_dead_letter_queue_while_their_batch_mates_succeed(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, logs: Logs
) -> None:
    pipeline.configure(urls_per_message=1)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    pipeline.send_raw(NOT_JSON, MISSING_FIELDS, NO_SUCH_RUN)
    run_id = pipeline.start(CRAWL)
    poison: dict[str, str] = {}
    deliveries: Counter[str] = Counter()
    max_receives = pipeline.max_receive_count
    for _ in range(max_receives + 2):
        batch = pipeline.receive(10)
        if not batch:
            break
        failed = pipeline.deliver(batch)
        poison |= {m.id: m.body for m in batch if m.id in failed}
        deliveries.update(m.id for m in batch)
        # Only the poison fails; every good message of the same batch is done and deleted.
        assert {m.body for m in batch if m.id in failed} <= {NOT_JSON, MISSING_FIELDS, NO_SUCH_RUN}
    assert pipeline.receive(10) == []
    pipeline.finalize()

    assert sorted(poison.values()) == sorted([NOT_JSON, MISSING_FIELDS, NO_SUCH_RUN])
    assert {deliveries[m] for m in poison} == {max_receives}
    assert sorted(pipeline.dead_letters()) == sorted(poison.values())
    t = pipeline.tally(CRAWL, run_id)
    assert (pipeline.run_state(CRAWL, run_id).status, t.done, t.records_new) == ("finished", 5, 100)
    # Returned at once (visibility 0), so they reach the dead-letter queue in seconds, not timeouts.
    assert {seconds for _, seconds in pipeline.visibility_changes} == {0}

    reasons = {e["message_id"]: e["reason"] for e in logs.named("malformed message")}
    assert set(reasons) == set(poison)
    by_body = {poison[m]: reason for m, reason in reasons.items()}
    assert by_body[NOT_JSON].startswith("body is not JSON")
    assert "not a valid CrawlMessage" in by_body[MISSING_FIELDS]
    assert "run_id: Field required" in by_body[MISSING_FIELDS]
    assert "tasks: Field required" in by_body[MISSING_FIELDS]
    assert "20200101T000000Z-000000" in by_body[NO_SUCH_RUN]
    assert "does not exist" in by_body[NO_SUCH_RUN]


def test_message_whose_visibility_cannot_be_changed_fails_alone(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, logs: Logs
) -> None:
    """An expired receipt handle (the message came back to another fetcher meanwhile) must not fail the batch."""
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    good = pipeline.receive(1)
    stale = dataclasses.replace(good[0], id="stale-1", receipt="expired-receipt-handle", body=NOT_JSON)

    assert pipeline.invoke([*good, stale]) == {"stale-1"}
    assert pipeline.tally(CRAWL, run_id).done == 5
    assert [e["message_id"] for e in logs.named("malformed message")] == ["stale-1"]


def test_concurrent_fetcher_invocations_report_their_own_failures(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The emulated runner's workers are threads standing in for containers: no invocation may see another's results.

    The two invocations are interleaved at a fixed point: A has judged its failing record when B starts judging.
    """
    pipeline = aws_pipeline
    pipeline.configure(urls_per_message=2)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    pipeline.start(CRAWL)
    pipeline.send_raw(NOT_JSON)
    # Received together (a FIFO group gives nothing more while one of its messages is in flight), invoked apart.
    both = pipeline.receive(2)
    first, second, poison = both[:1], both[1:], pipeline.receive(2)
    batch_a = [poison[-1], *first]  # the poison (sent last) is judged first, then A waits
    batch_b = second
    assert batch_a[0].body == NOT_JSON
    meet = threading.Barrier(2, timeout=20)
    real = getattr(fetcher, "process_partial_response")  # noqa: B009 - patched below

    def interleaved(*, event: Any, record_handler: Any, processor: Any, context: Any) -> Any:
        is_a = event["Records"][0]["messageId"] == batch_a[0].id
        judged = [0]

        def judge(record: Any) -> Any:
            if judged[0] == (1 if is_a else 0):  # A has judged its poison; B has judged nothing yet
                meet.wait()
            judged[0] += 1
            return record_handler(record)

        return real(event=event, record_handler=judge, processor=processor, context=context)

    monkeypatch.setattr(fetcher, "process_partial_response", interleaved)
    answers: dict[str, set[str]] = {}
    errors: list[BaseException] = []

    def container(name: str, batch: list[Message]) -> None:
        try:
            answers[name] = pipeline.invoke(batch)
        except BaseException as exc:
            errors.append(exc)
        finally:
            fetcher.close_container()

    threads = [
        threading.Thread(target=container, args=("a", batch_a)),
        threading.Thread(target=container, args=("b", batch_b)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert answers == {"a": {batch_a[0].id}, "b": set()}

"""Each handler accepts its sample event from ``events/`` (with the run id and URLs of a real run substituted).

Every sample is checked by running its handler on it, on moto: a test that read the files back and compared
them with themselves could not fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sluice.domain.layout import summary_key
from sluice.handlers import fetcher, finalizer, scheduler
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.context import LocalContext

from .conftest import AwsHarness, PipelineOn, SpecData

EVENTS = Path(__file__).resolve().parents[2] / "events"
CRAWL = "demo-books"  # the crawl the samples name
SAMPLE_PORT = 8710


def sample(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def ctx(name: str) -> Any:
    return LocalContext(function_name=f"sluice-dev-{name}", timeout_s=900)


def test_scheduler_accepts_its_sample_event(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline = aws_pipeline
    pipeline.spec(books_spec(CRAWL, site.base_url))
    answer = scheduler.handler(sample("scheduler.json"), ctx("scheduler"))

    assert (answer["crawl"], answer["complete"], answer["enqueued"]) == (CRAWL, True, 5)
    assert pipeline.run_state(CRAWL, answer["run_id"]).status == "running"
    assert pipeline.in_queue() == 1


def test_fetcher_accepts_its_sample_event(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline = aws_pipeline
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    event = sample("fetcher.json")
    record = event["Records"][0]
    body = json.loads(record["body"])
    body["run_id"] = run_id
    for task in body["tasks"]:
        task["url"] = task["url"].replace(f"127.0.0.1:{SAMPLE_PORT}", f"127.0.0.1:{site.port}")
    record["body"] = json.dumps(body)

    assert fetcher.handler(event, ctx("fetcher")) == {"batchItemFailures": []}
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched, t.records_new) == (1, 1, 20)
    assert site.stats.count("/catalogue/page-1.html") == 1


def test_finalizer_accepts_its_sample_event(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline = aws_pipeline
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    pipeline.drain()
    assert pipeline.finalize_requests == [{"crawl": CRAWL, "run_id": run_id}]
    pipeline.finalize_requests.clear()  # the finalizer is invoked with the sample instead
    event = sample("finalizer.json") | {"run_id": run_id}

    answer = finalizer.handler(event, ctx("finalizer"))
    assert answer == {
        "finalized": [
            {
                "crawl": CRAWL,
                "run_id": run_id,
                "summary_key": summary_key(CRAWL, run_id),
                "healthy": True,
            }
        ]
    }
    assert pipeline.run_state(CRAWL, run_id).status == "finished"
    assert finalizer.handler(event, ctx("finalizer")) == {"finalized": []}  # once only


def test_sweep_event_finalizes_a_run_whose_finalize_request_was_lost(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline = aws_pipeline
    pipeline.spec(books_spec(CRAWL, site.base_url))
    pipeline.spec(books_spec("in-flight", site.base_url, pages=1))
    done = pipeline.start(CRAWL)
    pipeline.drain()
    pipeline.finalize_requests.clear()  # the fetcher's async invoke never arrived
    in_flight = pipeline.start("in-flight")  # its page is still queued
    assert pipeline.run_state(CRAWL, done).status == "running"

    answer = finalizer.handler(sample("finalizer-sweep.json"), ctx("finalizer"))
    assert [(f["crawl"], f["run_id"], f["healthy"]) for f in answer["finalized"]] == [(CRAWL, done, True)]
    assert pipeline.run_state(CRAWL, done).status == "finished"
    assert pipeline.run_state("in-flight", in_flight).status == "running"
    assert pipeline.services.ledger.active_run(CRAWL) is None
    assert pipeline.services.ledger.active_run("in-flight") is not None

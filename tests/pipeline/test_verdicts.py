"""Verdicts end to end through the finalizer handler: summary, EMF metrics and one alert log event per failed check."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sluice.domain.layout import summary_key
from sluice.domain.runs import new_run_id
from sluice.messages import StartEvent
from sluice.metrics import NAMESPACE, UNITS, RunMetric
from sluice_tools.demosite import RunningDemoSite

from .conftest import Logs, Pipeline, SpecData

CRAWL = "books"
BOOKS = 100


def emf_documents(out: str) -> list[dict[str, Any]]:
    return [doc for line in out.splitlines() if line.startswith("{") and "_aws" in (doc := json.loads(line))]


def assert_emf_shape(doc: dict[str, Any], *, with_ratio: bool) -> None:
    [directive] = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == NAMESPACE == "Sluice"
    assert directive["Dimensions"] == [["crawl"]]
    assert doc["crawl"] == CRAWL
    names = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    # ProxiesEjected is a pool crawl's (request.proxies): this crawl has none. RunMissing is the sweep's;
    # ParquetFailed a failed copy's.
    emitted = set(RunMetric) - {RunMetric.PROXIES_EJECTED, RunMetric.RUN_MISSING, RunMetric.PARQUET_FAILED}
    expected = emitted if with_ratio else emitted - {RunMetric.RECORD_COUNT_RATIO}
    assert set(names) == {m.value for m in expected}
    assert names == {m.value: UNITS[m].value for m in expected}


def alerts_logged(logs: Logs, run_id: str) -> list[dict[str, Any]]:
    return [e for e in logs.named("run alert") if e["run_id"] == run_id]


def test_first_run_is_healthy_with_no_previous_run(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str], logs: Logs
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.start(CRAWL)
    pipeline.drain()
    [finalized] = pipeline.finalize()

    assert finalized == {
        "crawl": CRAWL,
        "run_id": run_id,
        "summary_key": summary_key(CRAWL, run_id),
        "healthy": True,
    }
    summary = pipeline.summary(CRAWL, run_id)
    verdict = summary["verdict"]
    assert (summary["status"], verdict["healthy"], verdict["alerts"]) == ("finished", True, [])
    assert summary["previous_run"] is None
    assert verdict["record_count_ratio"] is None
    checks = {c["check"]: c for c in verdict["checks"]}
    assert checks["record_count_drop"] == {
        "check": "record_count_drop",
        "ok": True,
        "message": "first run: no previous",
    }
    assert pipeline.run_state(CRAWL, run_id).healthy is True
    assert pipeline.services.ledger.active_run(CRAWL) is None  # the lock is released

    [doc] = emf_documents(capsys.readouterr().out)
    assert_emf_shape(doc, with_ratio=False)
    assert (doc["run_id"], doc["RecordsPerRun"], doc["RunHealthy"], doc["ErrorRate"]) == (run_id, [BOOKS], [1.0], [0.0])
    assert alerts_logged(logs, run_id) == []


def test_record_count_drop_after_a_broken_selector_is_unhealthy(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str], logs: Logs
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    first = pipeline.run(CRAWL)
    second = pipeline.run(CRAWL)  # nothing changed: 304s, every record reused
    site.set_catalogue(books=BOOKS, broken_selector=True)
    third = pipeline.run(CRAWL)

    healthy = pipeline.summary(CRAWL, second)
    assert healthy["verdict"]["healthy"] is True
    assert healthy["previous_run"] == {"run_id": first, "records": BOOKS}
    assert healthy["verdict"]["record_count_ratio"] == 1.0
    assert healthy["pages"]["not_modified"] == 5

    broken = pipeline.summary(CRAWL, third)
    verdict = broken["verdict"]
    assert verdict["healthy"] is False
    assert broken["previous_run"] == {"run_id": second, "records": BOOKS}
    assert verdict["record_count_ratio"] == 0.0
    assert broken["rejected"] == {"price": BOOKS}  # every record dropped for the field the redesign broke
    assert broken["null_rates"]["price"] == 1.0
    assert {a["check"] for a in verdict["alerts"]} == {"record_count_drop", "records_nonzero"}
    drop = next(a for a in verdict["alerts"] if a["check"] == "record_count_drop")
    assert (drop["value"], drop["threshold"]) == (0.0, 0.8)
    assert pipeline.run_state(CRAWL, third).healthy is False

    docs = emf_documents(capsys.readouterr().out)
    assert [d["run_id"] for d in docs] == [first, second, third]
    assert_emf_shape(docs[0], with_ratio=False)
    for doc in docs[1:]:
        assert_emf_shape(doc, with_ratio=True)
    assert [d["RunHealthy"] for d in docs] == [[1.0], [1.0], [0.0]]
    assert [d["RecordCountRatio"] for d in docs[1:]] == [[1.0], [0.0]]

    logged = alerts_logged(logs, third)
    assert sorted(e["check"] for e in logged) == sorted(a["check"] for a in verdict["alerts"])
    for event in logged:
        assert (event["event"], event["crawl"], event["level"]) == ("alert", CRAWL, "ERROR")
        alert = next(a for a in verdict["alerts"] if a["check"] == event["check"])
        assert (event["value"], event["threshold"], event["detail"]) == (
            alert["value"],
            alert["threshold"],
            alert["message"],
        )
    assert alerts_logged(logs, first) == alerts_logged(logs, second) == []


def test_error_rate_over_the_ceiling_is_unhealthy(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str], logs: Logs
) -> None:
    retry_times = 1
    spec = books_spec(CRAWL, site.base_url, urls=["/_test/status/404", "/_test/status/500"], retry_times=retry_times)
    pipeline.spec(spec)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert summary["status"] == "finished"
    assert summary["pages"] == {
        "enqueued": 7,
        "seeds": 7,
        "links": 0,
        "fetched": 5,
        "not_modified": 0,
        "not_due": 0,
        "failed": 2,
        "gone": 1,
        "skipped": 0,
        "pending": 0,
        "links_dropped": 0,
    }
    assert summary["failures"] == {"http 404": 1, "http 500": 1}
    # The 500 is retried in process and through the queue, and counted failed on its last receive.
    max_receives = pipeline.max_receive_count
    assert site.stats.count("/_test/status/500") == max_receives * (retry_times + 1)
    assert site.stats.count("/_test/status/404") == 1
    assert pipeline.dead_letters() == []
    verdict = summary["verdict"]
    assert verdict["healthy"] is False
    assert [a["check"] for a in verdict["alerts"]] == ["error_rate"]
    assert verdict["error_rate"] == round(2 / 7, 4)

    [doc] = emf_documents(capsys.readouterr().out)
    assert_emf_shape(doc, with_ratio=False)
    # the metric is the summary's error rate (4 places), so the dashboard and summary.json say one number
    assert (doc["PagesFailed"], doc["RunHealthy"], doc["ErrorRate"]) == ([2], [0.0], [verdict["error_rate"]])
    [event] = alerts_logged(logs, run_id)
    assert (event["check"], event["value"], event["threshold"]) == ("error_rate", 2 / 7, 0.05)


def test_run_ids_sort_by_start_time_within_one_second() -> None:
    second = datetime(2026, 11, 29, 21, 0, 0, tzinfo=UTC)
    ids = [new_run_id(second + timedelta(milliseconds=ms)) for ms in range(0, 1000, 3)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for run_id in ids:  # still what the messages accept
        assert StartEvent(crawl=CRAWL, run_id=run_id).run_id == run_id


def test_quick_reruns_within_one_second_each_compare_with_the_run_before(pipeline: Pipeline) -> None:
    second = datetime(2026, 11, 29, 21, 0, 0, tzinfo=UTC)
    ledger = pipeline.services.ledger
    previous: str | None = None
    for ms in range(1, 13):  # twelve runs opened a millisecond apart, all in one second
        opened = second + timedelta(milliseconds=ms)
        run = ledger.open_run(CRAWL, "digest", timedelta(hours=1), trigger=None, catalog_run=None, now=opened)
        found = ledger.latest_finished(CRAWL, run.run_id)
        assert (found.run_id if found else None) == previous
        ledger.finish(CRAWL, run.run_id, healthy=True, complete=True, records=1, summary_key="k")
        previous = run.run_id


def test_skipped_pages_are_reported_with_their_reason(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url, urls=["/private/secret.html"]))
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert summary["pages"]["skipped"] == 1
    assert summary["skips"] == {"robots.txt disallows": 1}
    assert summary["failures"] == {}

"""Finalize a run: judge it, compact its records, write its summary, emit its metrics, release its lock.

Finalizing happens once per run (a conditional status change guards it). A run is finalized
when its fan-out is complete and nothing is pending, or by a sweep once it passes its deadline,
as unfinished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sluice.aws.ledger import RunState
from sluice.domain.verdict import RunCounts, Verdict, judge
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics
from sluice.pipeline.services import Services


@dataclass(frozen=True, slots=True)
class Finalized:
    crawl: str
    run_id: str
    summary: dict[str, Any]
    summary_key: str


def finalize_run(crawl: str, run_id: str, services: Services, *, force: bool = False) -> Finalized | None:
    """Finalize a run if it is done (or overdue, or ``force``); None if it is not time yet or already done."""
    run = services.ledger.get_run(crawl, run_id)
    if run is None or run.status != "running":
        return None
    finished = run.drained
    if not (finished or run.overdue or force):
        return None
    if not services.ledger.begin_finalizing(crawl, run_id):
        return None
    run = services.ledger.get_run(crawl, run_id) or run  # counters as they stood when finalizing began
    spec = services.spec(crawl)
    previous = services.ledger.previous_finished(crawl, run_id)
    counts = RunCounts(
        fetched=run.counters["fetched"],
        not_modified=run.counters["not_modified"],
        failed=run.counters["failed"],
        skipped=run.counters["skipped"],
        records=run.records,
        items=run.counters["items"],
        missing=run.missing,
    )
    verdict = judge(counts, previous.records if previous else None, spec.alerts, finished=run.drained)
    records_key, lines = services.objects.compact(crawl, run_id)
    summary = run_summary(run, verdict, previous, records_key, lines)
    summary_key = services.objects.put_summary(crawl, run_id, summary)
    emit_metrics(run, verdict)
    services.ledger.finish(crawl, run_id, healthy=verdict.healthy, summary_key=summary_key)
    logger.info("run finalized", extra={"crawl": crawl, "run_id": run_id, "healthy": verdict.healthy})
    return Finalized(crawl, run_id, summary, summary_key)


def sweep(services: Services) -> list[Finalized]:
    """Finalize every open run that is done or overdue (a safety net behind the fetchers' trigger)."""
    done = []
    for lock in services.ledger.active_runs():
        result = finalize_run(lock["sk"], lock["run_id"], services)
        if result is not None:
            done.append(result)
    return done


def run_summary(
    run: RunState, verdict: Verdict, previous: RunState | None, records_key: str, lines: int
) -> dict[str, Any]:
    c = run.counters
    return {
        "crawl": run.crawl,
        "run_id": run.run_id,
        "status": "finished" if run.drained else "unfinished",
        "started_at": run.started_at,
        "finalized_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "spec_digest": run.spec_digest,
        "pages": {
            "enqueued": c["enqueued"],
            "fetched": c["fetched"],
            "not_modified": c["not_modified"],
            "failed": c["failed"],
            "skipped": c["skipped"],
            "pending": max(0, run.pending),
        },
        "records": {
            "total": run.records,
            "new": c["records_new"],
            "changed": c["records_changed"],
            "unchanged": c["records_unchanged"],
            "in_output": lines,
        },
        "failures": _top(run.failures),
        "skips": _top(run.skips),
        "rejected": {field: n for field, n in sorted(run.rejected.items()) if n},
        "null_rates": {
            k: round(v, 4) for k, v in RunCounts(items=c["items"], missing=run.missing).null_rates().items()
        },
        "previous_run": {"run_id": previous.run_id, "records": previous.records} if previous else None,
        "verdict": {
            "healthy": verdict.healthy,
            "record_count_ratio": verdict.record_count_ratio,
            "error_rate": round(verdict.error_rate, 4),
            "alerts": [
                {"check": a.name, "message": a.message, "value": a.value, "threshold": a.threshold}
                for a in verdict.alerts
            ],
            "checks": [{"check": ch.name, "ok": ch.ok, "message": ch.message} for ch in verdict.checks],
        },
        "outputs": {"records": records_key},
    }


def _top(tally: Mapping[str, int], n: int = 20) -> dict[str, int]:
    """The ``n`` commonest reasons, most common first."""
    return dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


def emit_metrics(run: RunState, verdict: Verdict) -> None:
    """One EMF document per run with the crawl as the only dimension, and one alert log event per failed check."""
    c = run.counters
    values: dict[RunMetric, float] = {
        RunMetric.RECORDS_PER_RUN: run.records,
        RunMetric.ERROR_RATE: verdict.error_rate,
        RunMetric.RUN_HEALTHY: 1.0 if verdict.healthy else 0.0,
        RunMetric.PAGES_FETCHED: c["fetched"],
        RunMetric.PAGES_NOT_MODIFIED: c["not_modified"],
        RunMetric.PAGES_FAILED: c["failed"],
        RunMetric.PAGES_SKIPPED: c["skipped"],
        RunMetric.RECORDS_NEW: c["records_new"],
        RunMetric.RECORDS_CHANGED: c["records_changed"],
        RunMetric.RUN_DURATION: (datetime.now(UTC) - datetime.fromisoformat(run.started_at)).total_seconds(),
    }
    if verdict.record_count_ratio is not None:
        values[RunMetric.RECORD_COUNT_RATIO] = verdict.record_count_ratio
    metrics.add_dimension(CRAWL_DIMENSION, run.crawl)
    for name, value in values.items():
        metrics.add_metric(name=name.value, unit=UNITS[name].value, value=value)
    metrics.add_metadata("run_id", run.run_id)
    metrics.flush_metrics()
    for alert in verdict.alerts:
        logger.error(
            "run alert",
            extra={
                "event": "alert",
                "crawl": run.crawl,
                "run_id": run.run_id,
                "check": alert.name,
                "value": alert.value,
                "threshold": alert.threshold,
                "detail": alert.message,
            },
        )

"""A finalized run's metrics and alert log events, read from its summary (what the dashboard and alarms watch)."""

from __future__ import annotations

from datetime import datetime

from sluice.domain.summary import RunSummary
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics


def emit_metrics(summary: RunSummary, *, now: float) -> None:
    """One EMF document per run with the crawl as the only dimension, and one alert log event per failed check.

    Every value is the summary's, so the dashboard shows what ``summary.json`` says (the cost estimate
    included); ``now`` (epoch seconds) ends the run's duration.
    """
    pages, records, verdict = summary.pages, summary.records, summary.verdict
    values: dict[RunMetric, float] = {
        RunMetric.RECORDS_PER_RUN: records.in_output if records is not None else 0,
        RunMetric.ERROR_RATE: verdict.error_rate or 0.0,
        RunMetric.RUN_HEALTHY: 1.0 if verdict.healthy else 0.0,
        RunMetric.PAGES_FETCHED: pages.fetched,
        RunMetric.PAGES_NOT_MODIFIED: pages.not_modified,
        RunMetric.PAGES_NOT_DUE: pages.not_due,
        RunMetric.PAGES_FAILED: pages.failed,
        RunMetric.PAGES_SKIPPED: pages.skipped,
        RunMetric.HOSTS_BLOCKED: len(summary.blocked_hosts),
        RunMetric.RECORDS_NEW: records.new if records is not None else 0,
        RunMetric.RECORDS_CHANGED: records.changed if records is not None else 0,
        RunMetric.RUN_DURATION: now - datetime.fromisoformat(summary.started_at).timestamp(),
        RunMetric.ESTIMATED_COST: summary.cost.estimated_usd if summary.cost is not None else 0.0,
        RunMetric.RUN_FAILED: 0.0,  # a run that ends failed emits 1 (emit_failed): its alarm's datapoints
    }
    if verdict.record_count_ratio is not None:
        values[RunMetric.RECORD_COUNT_RATIO] = verdict.record_count_ratio
    if summary.proxies:
        values[RunMetric.PROXIES_EJECTED] = sum(p.ejected for p in summary.proxies.values())
    metrics.add_dimension(CRAWL_DIMENSION, summary.crawl)
    for name, value in values.items():
        metrics.add_metric(name=name.value, unit=UNITS[name].value, value=value)
    metrics.add_metadata("run_id", summary.run_id)
    metrics.flush_metrics()
    for alert in verdict.alerts:
        logger.error(
            "run alert",
            extra={
                "event": "alert",
                "crawl": summary.crawl,
                "run_id": summary.run_id,
                "check": alert.check,
                "value": alert.value,
                "threshold": alert.threshold,
                "detail": alert.message,
            },
        )


def emit_failed(summary: RunSummary) -> None:
    """A run that ended failed: the run-failed metric (its alarm pages) and one alert log event with why."""
    metrics.add_dimension(CRAWL_DIMENSION, summary.crawl)
    metrics.add_metric(name=RunMetric.RUN_FAILED.value, unit=UNITS[RunMetric.RUN_FAILED].value, value=1.0)
    metrics.add_metric(name=RunMetric.RUN_HEALTHY.value, unit=UNITS[RunMetric.RUN_HEALTHY].value, value=0.0)
    metrics.add_metadata("run_id", summary.run_id)
    metrics.flush_metrics()
    logger.error(
        "run failed",
        extra={
            "event": "alert",
            "crawl": summary.crawl,
            "run_id": summary.run_id,
            "check": "finalize",
            "detail": summary.failed,
        },
    )

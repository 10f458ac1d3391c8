"""Metric names, units and dimensions: one module, imported by the code that emits and the alarms that watch."""

from __future__ import annotations

from enum import StrEnum

NAMESPACE = "Sluice"
CRAWL_DIMENSION = "crawl"


class Unit(StrEnum):
    """The CloudWatch units Sluice uses (the strings CloudWatch and Powertools both accept)."""

    COUNT = "Count"
    NONE = "None"
    PERCENT = "Percent"
    SECONDS = "Seconds"


class RunMetric(StrEnum):
    """Emitted once per finished run by the finalizer (RunMissing: by every sweep), with the crawl as the only
    dimension."""

    RECORDS_PER_RUN = "RecordsPerRun"
    RECORD_COUNT_RATIO = "RecordCountRatio"
    ERROR_RATE = "ErrorRate"
    RUN_HEALTHY = "RunHealthy"
    PAGES_FETCHED = "PagesFetched"
    PAGES_NOT_MODIFIED = "PagesNotModified"
    PAGES_NOT_DUE = "PagesNotDue"
    """Pages not requested: a sitemap's lastmod said they had not changed since their last fetch, or their recrawl
    interval had not run out (the summary's ``pages.not_due_by`` tells the two apart)."""
    PAGES_FAILED = "PagesFailed"
    PAGES_SKIPPED = "PagesSkipped"
    RECORDS_NEW = "RecordsNew"
    RECORDS_CHANGED = "RecordsChanged"
    RUN_DURATION = "RunDuration"
    HOSTS_BLOCKED = "HostsBlocked"
    """Hosts the breaker paused for the run: a site that refuses the crawler (403s, 429s, block pages)."""
    RUN_FAILED = "RunFailed"
    """1 for a run that ended failed (a finalize shard past its retries, too large, finalizing that never completed)."""
    ESTIMATED_COST = "EstimatedCostUSD"
    """The run's estimated AWS cost in US dollars at list prices: ``cost.estimated_usd`` of its summary."""
    RUN_MISSING = "RunMissing"
    """Emitted by every sweep (not per run) for each crawl with a schedule: 1 when no run has finished within
    the schedule's period plus an hour (``sluice.domain.schedule.run_missing``), else 0."""
    PARQUET_FAILED = "ParquetFailed"
    """1 when a run's Parquet copy (Athena ``UNLOAD``, ``sluice.pipeline.finalize.columnar``) failed or was refused:
    emitted by the finalizer or the sweep that found it, never for a copy that is running or succeeded."""
    PROXIES_EJECTED = "ProxiesEjected"
    """Proxies of the pool (``request.proxies``) ejected for the run: 407, no connection, or 403 on every answer
    (emitted for crawls with a pool only)."""


UNITS: dict[RunMetric, Unit] = {
    RunMetric.RECORDS_PER_RUN: Unit.COUNT,
    RunMetric.RECORD_COUNT_RATIO: Unit.NONE,
    RunMetric.ERROR_RATE: Unit.NONE,
    RunMetric.RUN_HEALTHY: Unit.NONE,
    RunMetric.PAGES_FETCHED: Unit.COUNT,
    RunMetric.PAGES_NOT_MODIFIED: Unit.COUNT,
    RunMetric.PAGES_NOT_DUE: Unit.COUNT,
    RunMetric.PAGES_FAILED: Unit.COUNT,
    RunMetric.PAGES_SKIPPED: Unit.COUNT,
    RunMetric.RECORDS_NEW: Unit.COUNT,
    RunMetric.RECORDS_CHANGED: Unit.COUNT,
    RunMetric.RUN_DURATION: Unit.SECONDS,
    RunMetric.HOSTS_BLOCKED: Unit.COUNT,
    RunMetric.RUN_FAILED: Unit.COUNT,
    RunMetric.ESTIMATED_COST: Unit.NONE,  # CloudWatch has no currency unit: the name says dollars
    RunMetric.PROXIES_EJECTED: Unit.COUNT,
    RunMetric.RUN_MISSING: Unit.COUNT,
    RunMetric.PARQUET_FAILED: Unit.COUNT,
}

"""The missing-run check, run by every sweep: each scheduled crawl judged against its own schedule.

A CloudWatch window cannot hold a monthly schedule (an alarm looks back seven days at most), so the sweep
judges silence itself and emits ``RunMissing`` (1 or 0) for each crawl with a schedule; the crawl's
missing-run alarm fires on a 1, and on no datum at all (no sweep is silence too).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sluice.domain.schedule import run_missing
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics
from sluice.pipeline.services import Services, load_crawl
from sluice.spec import SpecError, spec_files


@dataclass(frozen=True, slots=True)
class ScheduleCheck:
    """One scheduled crawl as the sweep found it."""

    crawl: str
    schedule: str
    last_finished_at: str | None
    missing: bool


def check_schedules(services: Services) -> list[ScheduleCheck]:
    """Judge every crawl of the shipped specs that has a schedule (a spec that does not load is logged, skipped)."""
    now = datetime.fromtimestamp(services.clock(), UTC)
    checks = []
    for path in spec_files(services.specs_dir):
        try:
            spec = load_crawl(services.specs_dir, path.stem)
        except SpecError as exc:
            logger.error("spec not loaded for the missing-run check", extra={"crawl": path.stem, "error": str(exc)})
            continue
        if spec.schedule is None:
            continue
        last = services.ledger.latest_finished(spec.name)
        finished_at = last.finished_at if last is not None else None
        checks.append(
            ScheduleCheck(spec.name, spec.schedule, finished_at, run_missing(spec.schedule, finished_at, now))
        )
    return checks


def emit_missing_runs(checks: list[ScheduleCheck]) -> None:
    """One EMF document per scheduled crawl: ``RunMissing`` with the crawl as the only dimension."""
    for check in checks:
        metrics.add_dimension(CRAWL_DIMENSION, check.crawl)
        metrics.add_metric(
            name=RunMetric.RUN_MISSING.value, unit=UNITS[RunMetric.RUN_MISSING].value, value=float(check.missing)
        )
        metrics.flush_metrics()
        if check.missing:
            logger.error(
                "run missing",
                extra={"event": "alert", "crawl": check.crawl, "check": "missing_run", "schedule": check.schedule},
            )

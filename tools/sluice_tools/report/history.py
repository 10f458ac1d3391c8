"""A crawl's last runs as the report draws them: one :class:`RunPoint` per run, read from its summary.

The summaries are read where `sluice runs` reads them (the local state folder, or a stage's bucket);
a run re-extracted from its archive also says what it said when it ran (``reextracted.before``), so
an alert it raised then stays marked on its point.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sluice.domain.summary import CheckResult, RunSummary
from sluice.spec import CrawlSpec
from sluice.spec.columns import field_names
from sluice_tools.ops.history import RunHistory

OUTCOMES = ("fetched", "not_modified", "not_due", "failed", "skipped")
"""How a page of a run ended, in the order the pages chart stacks them."""


@dataclass(frozen=True, slots=True)
class Alert:
    check: str
    message: str
    when: str
    """``at run time`` for an alert the run raised before it was re-extracted, else ``now``."""


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One finished run, as the report's charts and its page show it."""

    run_id: str
    started_at: str
    healthy: bool
    records: int
    by_type: dict[str, int]
    records_at_run_time: int | None
    """The records the run had before it was re-extracted (None: it never was)."""
    floor: float | None
    """The fewest records this run could have without a record-count drop alert (None: no previous run)."""
    pages: dict[str, int]
    error_rate: float
    null_rates: dict[str, float]
    duration_s: float | None
    cost_usd: float | None
    alerts: list[Alert]
    checks: list[CheckResult]
    failures: dict[str, int]

    @property
    def anchor(self) -> str:
        return f"run-{self.run_id}"


def _seconds(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())


def run_point(summary: RunSummary, previous: int | None, floor_share: float | None, fields: list[str]) -> RunPoint:
    """The run a summary describes; ``previous`` is the record count of the run before, ``floor_share`` the spec's
    ``alerts.record_count_floor``, ``fields`` the fields whose null rates are drawn (0 where a summary has none)."""
    verdict = summary.verdict
    alerts = [Alert(a.check, a.message, "now") for a in verdict.alerts]
    before = summary.reextracted.before if summary.reextracted is not None else None
    if before is not None and before.verdict is not None:
        alerts += [Alert(a.check, a.message, "at run time") for a in before.verdict.alerts]
    nulls = summary.null_rates
    pages = summary.pages
    return RunPoint(
        run_id=summary.run_id,
        started_at=summary.started_at,
        healthy=verdict.healthy,
        records=summary.records_total,
        by_type=dict(summary.records.by_type or {}) if summary.records is not None else {},
        records_at_run_time=before.records.total if before is not None and before.records is not None else None,
        floor=previous * floor_share if previous is not None and floor_share is not None else None,
        pages={
            "fetched": pages.fetched,
            "not_modified": pages.not_modified,
            "not_due": pages.not_due,
            "failed": pages.failed,
            "skipped": pages.skipped,
        },
        error_rate=verdict.error_rate or 0.0,
        null_rates={name: float(nulls.get(name, 0.0)) for name in (fields or sorted(nulls))},
        duration_s=_seconds(summary.started_at, summary.finalized_at),
        cost_usd=summary.cost.estimated_usd if summary.cost is not None else None,
        alerts=alerts,
        checks=list(verdict.checks),
        failures=dict(summary.failures),
    )


@dataclass(frozen=True, slots=True)
class CrawlHistory:
    crawl: str
    runs: list[RunPoint]
    """Oldest first."""
    max_error_rate: float | None


def crawl_history(history: RunHistory, crawl: str, last: int, spec: CrawlSpec | None) -> CrawlHistory:
    """The crawl's last ``last`` finished runs, oldest first (runs without a summary yet are left out)."""
    found = [s for s in (history.summary(run) for run in history.recent_runs(crawl, last)) if s is not None]
    # started_at holds whole seconds; a run id starts with its start to the millisecond (domain.runs.new_run_id:
    # the 3 hex digits after the dash), then random digits. Runs started in one millisecond (a set clock) are told
    # apart by when they finished.
    summaries = sorted(found, key=lambda s: (s.started_at, s.run_id[:20], s.finalized_at or "", s.run_id))
    floor = spec.alerts.record_count_floor if spec is not None else None
    fields = field_names(spec) if spec is not None else []
    points = []
    for summary in summaries:
        # what the record-count check compared with
        previous = summary.previous_run.records if summary.previous_run is not None else None
        points.append(run_point(summary, previous, floor, fields))
    return CrawlHistory(crawl, points, spec.alerts.max_error_rate if spec is not None else None)

"""A crawl's last runs as the report draws them: one :class:`RunPoint` per run, read from its summary.

The summaries are read where `sluice runs` reads them (the local state folder, or a stage's bucket);
a run re-extracted from its archive also says what it said when it ran (``reextracted.before``), so
an alert it raised then stays marked on its point.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
    checks: list[dict[str, Any]]
    failures: dict[str, int]

    @property
    def anchor(self) -> str:
        return f"run-{self.run_id}"


def _seconds(start: str, end: str | None) -> float | None:
    if end is None:
        return None
    return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())


def run_point(summary: dict[str, Any], previous: int | None, floor_share: float | None, fields: list[str]) -> RunPoint:
    """The run a summary describes; ``previous`` is the record count of the run before, ``floor_share`` the spec's
    ``alerts.record_count_floor``, ``fields`` the fields whose null rates are drawn (0 where a summary has none)."""
    verdict = summary["verdict"]
    alerts = [Alert(a["check"], a["message"], "now") for a in verdict.get("alerts", [])]
    before = (summary.get("reextracted") or {}).get("before") or {}
    if before:
        alerts += [Alert(a["check"], a["message"], "at run time") for a in before.get("verdict", {}).get("alerts", [])]
    nulls = summary.get("null_rates", {})
    cost = summary.get("cost") or {}
    return RunPoint(
        run_id=summary["run_id"],
        started_at=summary["started_at"],
        healthy=bool(verdict["healthy"]),
        records=int(summary["records"]["total"]),
        by_type=dict(summary["records"].get("by_type") or {}),
        records_at_run_time=int(before["records"]["total"]) if "records" in before else None,
        floor=previous * floor_share if previous is not None and floor_share is not None else None,
        pages={k: int(summary["pages"].get(k, 0)) for k in OUTCOMES},
        error_rate=float(verdict.get("error_rate") or 0.0),
        null_rates={name: float(nulls.get(name, 0.0)) for name in (fields or sorted(nulls))},
        duration_s=_seconds(summary["started_at"], summary.get("finalized_at")),
        cost_usd=float(cost["estimated_usd"]) if "estimated_usd" in cost else None,
        alerts=alerts,
        checks=list(verdict.get("checks", [])),
        failures=dict(summary.get("failures") or {}),
    )


@dataclass(frozen=True, slots=True)
class CrawlHistory:
    crawl: str
    runs: list[RunPoint]
    """Oldest first."""
    max_error_rate: float | None


def crawl_history(history: RunHistory, crawl: str, last: int, spec: CrawlSpec | None) -> CrawlHistory:
    """The crawl's last ``last`` finished runs, oldest first (runs without a summary yet are left out)."""
    found = [s for s in (history.summary(run) for run in history.recent_runs(crawl, last)) if s and "verdict" in s]
    # started_at holds whole seconds; a run id starts with its start to the millisecond (domain.runs.new_run_id:
    # the 3 hex digits after the dash), then random digits. Runs started in one millisecond (a set clock) are told
    # apart by when they finished.
    summaries = sorted(
        found, key=lambda s: (s["started_at"], str(s["run_id"])[:20], s.get("finalized_at") or "", str(s["run_id"]))
    )
    floor = spec.alerts.record_count_floor if spec is not None else None
    fields = field_names(spec) if spec is not None else []
    points = []
    for summary in summaries:
        previous = (summary.get("previous_run") or {}).get("records")  # what the record-count check compared with
        points.append(run_point(summary, previous, floor, fields))
    return CrawlHistory(crawl, points, spec.alerts.max_error_rate if spec is not None else None)

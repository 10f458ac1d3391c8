"""`sluice runs NAME`: a crawl's last runs, one line each: status, verdict, pages, records, cost, duration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sluice.domain.runs import RunState
from sluice.domain.summary import PageCounts, RunSummary
from sluice_tools.ops.history import NoSuchRun, RunHistory, command_running
from sluice_tools.ops.table import as_table


def pages_done(pages: PageCounts) -> int:
    """Pages done: fetched, not modified, not due, failed or skipped."""
    return pages.fetched + pages.not_modified + pages.not_due + pages.failed + pages.skipped


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run as ``sluice runs`` lists it (None where the run has not said yet)."""

    crawl: str
    run_id: str
    started_at: str
    status: str
    """``finished`` or ``unfinished`` once finalized (the summary's word), else the ledger's (``running``...), or
    ``interrupted`` for a local run in flight that no command runs (a killed command left it: `sluice run` resumes)."""
    healthy: bool | None
    alerts: list[str]
    pages: int | None
    """Pages done: fetched, not modified, not due, failed or skipped."""
    failed: int | None
    records: int | None
    cost_usd: float | None
    duration_s: float | None

    @classmethod
    def of(cls, run: RunState, summary: RunSummary | None, *, interrupted: bool = False) -> RunRow:
        """``interrupted``: no command runs the run any more (said only of a run not finished)."""
        pages = summary.pages if summary is not None else None
        cost = summary.cost if summary is not None else None
        end = datetime.fromisoformat(run.finished_at) if run.finished_at else datetime.now(UTC)
        return cls(
            crawl=run.crawl,
            run_id=run.run_id,
            started_at=run.started_at,
            status=summary.status
            if summary is not None and run.status == "finished"
            else ("interrupted" if interrupted and run.status != "finished" else run.status),
            healthy=run.healthy,
            alerts=[a.check for a in summary.verdict.alerts] if summary is not None else [],
            pages=pages_done(pages) if pages is not None else None,
            failed=pages.failed if pages is not None else None,
            records=run.records if run.records is not None else (summary.records_total if summary else None),
            cost_usd=cost.estimated_usd if cost is not None else None,
            duration_s=None
            if interrupted and not run.finished_at
            else (end - datetime.fromisoformat(run.started_at)).total_seconds(),
        )

    @property
    def verdict(self) -> str:
        if self.healthy is None:
            return "-"
        if self.healthy:
            return "healthy"
        return f"UNHEALTHY ({', '.join(self.alerts)})" if self.alerts else "UNHEALTHY"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"verdict": self.verdict}


def recent(history: RunHistory, crawl: str, limit: int) -> list[RunRow]:
    """The crawl's last ``limit`` runs, newest first; NoSuchRun if the crawl is not known there at all."""
    runs = history.recent_runs(crawl, limit)
    if not runs and crawl not in history.crawls():
        known = ", ".join(history.crawls()) or "none"
        raise NoSuchRun(f"no crawl {crawl!r} in {history.where} (crawls: {known})")
    stalled = command_running(history) is False
    return [
        RunRow.of(run, history.summary(run) if run.status == "finished" else None, interrupted=stalled) for run in runs
    ]


def resume_hint(crawl: str, specs: str, state: str, flags: Sequence[str] = ()) -> str:
    """How to go on with a run a killed command left (or give it up); ``flags``: those it was started with that
    change what it may fetch (``--allow-loopback``), which the resume must be given too."""
    given = "".join(f" {flag}" for flag in flags)
    return (
        f"interrupted: no sluice command is running it (the one that ran it was killed); "
        f"`sluice run {specs}/{crawl}.yaml --state {state}{given}` resumes it, with --restart closes it as unfinished"
    )


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = round(seconds)
    if seconds < 1:
        return "<1s"
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def runs_table(rows: list[RunRow]) -> str:
    columns = ["run", "started (UTC)", "status", "verdict", "pages", "failed", "records", "cost", "duration"]
    cells = [
        [
            r.run_id,
            r.started_at[:19].replace("T", " "),
            r.status,
            r.verdict,
            r.pages,
            r.failed,
            r.records,
            f"${r.cost_usd:.4f}" if r.cost_usd is not None else None,
            duration(r.duration_s) if r.status != "running" else f"{duration(r.duration_s)} so far",
        ]
        for r in rows
    ]
    return as_table(columns, cells, null="-")

"""`sluice show RUN`: one run's summary as `sluice run` ends on it, its failed checks, top failure reasons,
null rates and where its outputs are; or, for a run in flight, how far it has got."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sluice.domain.layout import manifest_key, records_prefix, summary_key
from sluice.domain.runs import RunState
from sluice.domain.summary import RunSummary
from sluice_tools.ops.history import LocalHistory, NoSuchRun, RunHistory, command_running, fetch_flags
from sluice_tools.ops.runs import RunRow, duration, resume_hint
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything ``sluice show`` says of a run."""

    run: RunState
    summary: RunSummary | None
    outputs: dict[str, str]
    dead_letters: int | None
    """The run's messages in the dead-letter queue (known locally; on AWS the queue is shared, see redrive)."""
    progress: dict[str, int] | None
    """For a run not finalized yet: pages done and enqueued, records and failures so far."""
    resume: str | None = None
    """For a local run in flight that no command runs any more (a killed command left it): how to go on with it."""
    catalog: str | None = None
    """The verdict of the run's catalog run when this run used it (:func:`catalog_verdict`)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "run": asdict(self.run),
            "summary": self.summary.to_json() if self.summary is not None else None,
            "outputs": self.outputs,
            "dead_letters": self.dead_letters,
            "progress": self.progress,
            "interrupted": self.resume is not None,
        }

    def text(self) -> str:
        run, row = self.run, RunRow.of(self.run, self.summary, interrupted=self.resume is not None)
        timing = f"  started  {run.started_at}" + (
            f", finished {run.finished_at} (took {duration(row.duration_s)})" if run.finished_at else ""
        )
        if self.summary is None:
            lines = [f"run {run.run_id} of {run.crawl}: {row.status} (its summary is written when it is finalized)"]
            if self.resume is not None:
                lines.append(f"  {self.resume}")
            lines.append(f"{timing}, deadline {run.deadline}")
            if self.progress is not None:
                p = self.progress
                lines.append(
                    f"  so far   {p['done']} of {p['enqueued']} pages done, "
                    f"{p['records']} records, {p['failed']} failed"
                )
            lines += [f"  {name:<8} {where}" for name, where in self.outputs.items() if name == "logs"]
            return "\n".join(lines)
        dead: list[dict[str, Any]] = [{}] * (self.dead_letters or 0)  # as_text counts them
        shown = LocalRun(run.crawl, run.run_id, self.summary, dead, dict(self.outputs))
        lines = as_text(shown, self.catalog).split("\n")
        lines.insert(1, timing)
        if not any(v > 0 for v in self.summary.null_rates.values()):
            lines.insert(4, "  nulls    none: every item had a value for every field")
        return "\n".join(lines)


def report(history: RunHistory, run: RunState, *, specs: str = "crawls", state: str = ".sluice") -> RunReport:
    """What ``sluice show`` says of ``run``; ``specs`` and ``state`` as the command was given them (for the command
    that resumes a run a killed command left)."""
    summary = history.summary(run) if run.status == "finished" else None
    outputs: dict[str, str] = {}
    progress = None
    if summary is not None:
        outputs = {
            "records": history.location(records_prefix(run.crawl, run.run_id)),
            "manifest": history.location(manifest_key(run.crawl, run.run_id)),
            "summary": history.location(summary_key(run.crawl, run.run_id)),
        }
        parquet = history.parquet(run)
        if parquet is not None:
            outputs["parquet"] = parquet
    else:
        p = history.progress(run.run_id)
        progress = {"done": p.done, "enqueued": run.seeds + p.claimed, "records": p.records, "failed": p.failed}
    logs = history.logs_of(run)
    if logs is not None:
        outputs["logs"] = logs
    resume = None
    if run.status != "finished" and command_running(history) is False:
        resume = resume_hint(run.crawl, specs, state, fetch_flags(history, run.crawl, run.run_id))
    catalog = catalog_verdict(history, summary) if summary is not None else None
    return RunReport(run, summary, outputs, history.dead_letters(run.run_id), progress, resume, catalog)


def local_catalog_verdict(state_dir: Path, summary: RunSummary) -> str | None:
    """:func:`catalog_verdict` of a run of the local store in ``state_dir`` (what `sluice run` ends on)."""
    if summary.catalog_run is None:
        return None
    try:
        history = LocalHistory(state_dir)
    except NoSuchRun:
        return None
    try:
        return catalog_verdict(history, summary)
    finally:
        history.close()


def catalog_verdict(history: RunHistory, summary: RunSummary) -> str | None:
    """``healthy`` or ``UNHEALTHY (its alerts)``: the verdict the run's catalog run had when the run started from it
    (one repaired since is taken as it was: the run read the records it had then). None: no catalog run, or it is
    not there to read."""
    if summary.catalog_run is None:
        return None
    catalog = history.find_run(summary.catalog_run)
    found = history.summary(catalog) if catalog is not None else None
    if found is None:
        return None
    verdict = found.verdict
    repair = found.reextracted
    if repair is not None and repair.before is not None and repair.before.verdict is not None:
        try:
            later = datetime.fromisoformat(repair.at) > datetime.fromisoformat(summary.started_at or "")
        except ValueError:
            later = False
        if later:
            verdict = repair.before.verdict
    if verdict.healthy:
        return "healthy"
    return f"UNHEALTHY ({', '.join(a.check for a in verdict.alerts)})" if verdict.alerts else "UNHEALTHY"

"""Where a crawl's runs are read from: the local state folder, or a deployed stage's ledger table and bucket.

Both read what the pipeline wrote through its own adapters: the run ledger (one item per run) and
each run's ``summary.json`` beside its records.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Protocol

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.adapters.aws.objects import S3Objects
from sluice.adapters.local import LocalStore
from sluice.adapters.local.store import DB_NAME
from sluice.domain.layout import RUNS_PREFIX, crawl_of_prefix, parquet_prefix, summary_key
from sluice.domain.runs import Progress, RunState
from sluice.domain.summary import RunSummary
from sluice.pipeline.finalize.columnar_state import describe, read_state
from sluice.spec import spec_files
from sluice_tools.ops.query import PARQUET_DONE
from sluice_tools.ops.stage import Stage, aws_errors
from sluice_tools.runner.session import remembered_flags


class NoSuchRun(LookupError):
    """No run or crawl by that name where the command looked; the text names what there is."""


class RunHistory(Protocol):
    """What ``sluice runs``, ``show`` and ``logs`` read, wherever the runs are."""

    where: str
    """Where the runs are, for messages: ``.sluice/`` or ``stage dev``."""

    def crawls(self) -> list[str]: ...

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]: ...

    def find_run(self, run_id: str) -> RunState | None: ...

    def summary(self, run: RunState) -> RunSummary | None: ...

    def location(self, key: str) -> str: ...

    def progress(self, run_id: str) -> Progress: ...

    def dead_letters(self, run_id: str) -> int | None:
        """The run's messages in the dead-letter queue, where the queue can say (None: it cannot)."""
        ...

    def logs_of(self, run: RunState) -> str | None:
        """Where the run's logs are, for a person (None: nowhere yet)."""
        ...

    def parquet(self, run: RunState) -> str | None:
        """Where the run's Parquet copy is, or why it is not there (None: the run has none to have)."""
        ...


def no_local_runs(state_dir: Path) -> str:
    """Why a state folder without the local store has no runs to read: none yet, or only runs made with
    --emulate-aws, whose state is under ``STATE/moto/`` (said with where their summaries and logs are)."""
    folder = state_dir / EMULATED
    if (folder / "s3").is_dir():
        return (
            f"no local runs in {state_dir}/: it holds runs made with --emulate-aws, kept in {folder}/ "
            f"(moto's tables in dynamodb/, its bucket in s3/: each run's summary and records under "
            f"{folder / 's3' / RUNS_PREFIX}), which `sluice runs`, `show` and `logs` do not read; "
            f"their logs are in {folder / 'logs'}/"
        )
    return f"no runs in {state_dir}/: `sluice run` keeps its state there (or pass --state)"


class LocalHistory:
    """The runs of a local state folder (``sluice run --state``), read without taking its lock."""

    def __init__(self, state_dir: Path) -> None:
        if not (state_dir / DB_NAME).is_file():
            raise NoSuchRun(no_local_runs(state_dir))
        self.where = f"{state_dir}/"
        self.store = LocalStore.open(state_dir)

    def close(self) -> None:
        self.store.close()

    def command_running(self) -> bool:
        """Whether a ``sluice`` command holds the state folder's lock, as every run it runs does from start to end.

        Without one, a run the ledger still has in flight was left by a command that was killed: nothing runs it
        until ``sluice run`` resumes it. The lock is taken shared for an instant and let go (a command starting in
        that instant is refused, as it is while another run holds the folder, and can be run again)."""
        try:
            fd = os.open(self.store.folder / ".lock", os.O_RDONLY)
        except FileNotFoundError:
            return False  # no command ever ran here
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing lets go of the shared lock, if it was taken
        return False

    def crawls(self) -> list[str]:
        return self.store.ledger.crawls()

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        return self.store.ledger.recent_runs(crawl, limit)

    def find_run(self, run_id: str) -> RunState | None:
        return self.store.ledger.find_run(run_id)

    def summary(self, run: RunState) -> RunSummary | None:
        raw = self.store.objects.get(summary_key(run.crawl, run.run_id))
        return RunSummary.from_bytes(raw) if raw is not None else None

    def location(self, key: str) -> str:
        return self.store.objects.location(key)

    def progress(self, run_id: str) -> Progress:
        return self.store.frontier.progress(run_id)

    def dead_letters(self, run_id: str) -> int:
        return self.store.queue.depth(run_id).dead

    def fetch_flags(self, crawl: str, run_id: str) -> list[str]:
        """The flags the run was started with that change what it may fetch (a resume must be given them)."""
        return remembered_flags(self.store.folder, crawl, run_id) or []

    def log_file(self, run: RunState) -> Path:
        """The run's JSON Lines log, as ``sluice run`` names it (``logs/CRAWL-RUN.jsonl``)."""
        return self.store.folder / "logs" / f"{run.crawl}-{run.run_id}.jsonl"

    def logs_of(self, run: RunState) -> str | None:
        log = self.log_file(run)
        return str(log) if log.exists() else None

    def parquet(self, run: RunState) -> str | None:
        folder = self.store.folder / "objects" / parquet_prefix(run.crawl, run.run_id)
        done = folder / PARQUET_DONE
        if not done.is_file():
            return None  # `sluice run` said why in its result (a note) and its log
        return f"{folder} ({json.loads(done.read_text(encoding='utf-8'))['rows']} rows)"


class StageHistory:
    """The runs of a deployed stage: its ledger table and bucket, with your AWS credentials."""

    def __init__(self, stage: Stage, specs_dir: Path) -> None:
        self.stage, self.specs_dir = stage, specs_dir
        self.where = f"stage {stage.name}"
        with aws_errors(stage.name, "open the stage's ledger"):
            self.ledger = DynamoRunLedger(stage.config.ledger_table)
            self.objects = S3Objects(stage.bucket)

    def crawls(self) -> list[str]:
        """Crawls of the specs folder, with a run in flight, or with output in the bucket."""
        found = {p.stem for p in spec_files(self.specs_dir)}
        with aws_errors(self.stage.name, "list the stage's runs"):
            found |= {lock.crawl for lock in self.ledger.active_runs()}
            pages = (
                client("s3")
                .get_paginator("list_objects_v2")
                .paginate(Bucket=self.objects.bucket, Prefix=f"{RUNS_PREFIX}crawl=", Delimiter="/")
            )
            for page in pages:
                for common in page.get("CommonPrefixes", []):
                    crawl = crawl_of_prefix(common["Prefix"])
                    if crawl is not None:
                        found.add(crawl)
        return sorted(found)

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        with aws_errors(self.stage.name, f"read the runs of {crawl}"):
            return self.ledger.recent_runs(crawl, limit)

    def find_run(self, run_id: str) -> RunState | None:
        """One consistent read per known crawl: the ledger keys a run by crawl, then run id."""
        with aws_errors(self.stage.name, f"read run {run_id}"):
            for crawl in self.crawls():
                run = self.ledger.get_run(crawl, run_id)
                if run is not None:
                    return run
        return None

    def summary(self, run: RunState) -> RunSummary | None:
        with aws_errors(self.stage.name, f"read the summary of run {run.run_id}"):
            raw = self.objects.get(summary_key(run.crawl, run.run_id))
        return RunSummary.from_bytes(raw) if raw is not None else None

    def location(self, key: str) -> str:
        return self.objects.location(key)

    def progress(self, run_id: str) -> Progress:
        with aws_errors(self.stage.name, f"read the progress of run {run_id}"):
            frontier = DynamoFrontier(self.stage.config.ledger_table, ttl_days=self.stage.config.claim_ttl_days)
            return frontier.progress(run_id)

    def dead_letters(self, run_id: str) -> int | None:
        return None  # one queue for every run: `sluice redrive` reads it whole

    def parquet(self, run: RunState) -> str | None:
        if not run.records:
            return None  # a run that ended failed or empty has no copy to make
        with aws_errors(self.stage.name, f"read the Parquet copy of run {run.run_id}"):
            state = read_state(self.objects, run.crawl, run.run_id)
        return describe(state, self.objects.location(parquet_prefix(run.crawl, run.run_id)))

    def logs_of(self, run: RunState) -> str | None:
        return f"CloudWatch Logs (`sluice logs {run.run_id} --stage {self.stage.name}`)"


def fetch_flags(history: RunHistory, crawl: str, run_id: str) -> list[str]:
    """The fetch flags a local run was started with (none for a stage's: its runs are never resumed from here)."""
    return history.fetch_flags(crawl, run_id) if isinstance(history, LocalHistory) else []


def command_running(history: RunHistory) -> bool | None:
    """Whether a command is running the history's runs in flight: known for a local state folder (its lock), not
    for a stage (None: its runs run on AWS, whatever runs here)."""
    return history.command_running() if isinstance(history, LocalHistory) else None


EMULATED = "moto"
"""The folder under the state folder where `sluice run --emulate-aws` keeps moto's tables (``dynamodb/``) and
bucket (``s3/``) between runs: its runs are not in the local store ``sluice show`` and ``runs`` read."""


def emulated_run(state_dir: Path, run_id: str) -> str | None:
    """Where a run `sluice run --emulate-aws` made keeps its data (its summary, records, state), said for a person;
    None when the emulated state holds no run by that id."""
    folder = state_dir / EMULATED
    bucket = folder / "s3"
    found = sorted(bucket.glob(f"{RUNS_PREFIX}crawl=*/run={run_id}/")) if run_id else []
    if not found:
        return None
    run = found[0]
    summary = run / "summary.json"
    shown = f"its summary {summary}" if summary.is_file() else "no summary yet (the run did not end)"
    return (
        f"run {run_id} was made with --emulate-aws: its data is in {folder}/ (moto's tables in dynamodb/, its "
        f"bucket in s3/), not in the local store `sluice show` reads; {shown}, its records {run / 'records'}/"
    )


def emulated_logs(state_dir: Path, run_id: str) -> str | None:
    """:func:`emulated_run` with where the run's log lines are (``STATE/moto/logs/CRAWL-RUN.jsonl``)."""
    found = emulated_run(state_dir, run_id)
    if found is None:
        return None
    logs = sorted((state_dir / EMULATED / "logs").glob(f"*-{run_id}.jsonl"))
    return f"{found}; its log lines {logs[0]} (JSON Lines)" if logs else f"{found}; no log file of it was kept"


def run_named(history: RunHistory, run_id: str) -> RunState:
    """The run with this id, or NoSuchRun naming the crawls there are."""
    run = history.find_run(run_id)
    if run is None:
        crawls = history.crawls()
        raise NoSuchRun(
            f"no run {run_id} in {history.where} (crawls: {', '.join(crawls) or 'none'}; `sluice runs NAME` lists runs)"
        )
    return run


def open_history(state_dir: Path, stage: str | None, specs_dir: Path) -> LocalHistory | StageHistory:
    """The runs of ``stage`` when one is named, else of the local state folder."""
    return StageHistory(Stage.named(stage), specs_dir) if stage is not None else LocalHistory(state_dir)

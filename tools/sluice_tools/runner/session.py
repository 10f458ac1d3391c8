"""What every local run shares, whichever adapters it runs on: the state folder's lock, its logs, its result."""

from __future__ import annotations

import fcntl
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sluice.domain.summary import RunSummary
from sluice.observability import logger


@dataclass(frozen=True, slots=True)
class RunView:
    """A run in flight, as the progress bar shows it."""

    done: int
    enqueued: int
    records: int
    failed: int

    @classmethod
    def final(cls, summary: RunSummary) -> RunView:
        """The run as its summary counted it: what the bar ends on (the in-flight hints can lag the count)."""
        pages = summary.pages
        done = pages.fetched + pages.not_modified + pages.not_due + pages.failed + pages.skipped
        return cls(done, max(done, pages.enqueued), summary.records_total, pages.failed)


Progress = Callable[[RunView], None]


@dataclass
class LocalRun:
    """What a local run produced."""

    crawl: str
    run_id: str
    summary: RunSummary
    dead_letters: list[dict[str, Any]]
    outputs: dict[str, str]
    resumed: str | None = None
    """Set when this command finished a run an earlier one left: what it found then."""
    notes: list[str] = field(default_factory=list)


class StateInUse(RuntimeError):
    """Another local run holds the state folder: two runs on one folder would overwrite each other's state."""


@contextmanager
def exclusive(folder: Path) -> Iterator[None]:
    """Hold the state folder's lock for the whole run, or refuse at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateInUse(f"another sluice run is using {folder}/ (pass a different --state)") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def logs_to(sink: TextIO) -> Iterator[None]:
    """Send the pipeline's log lines (Powertools Logger) and EMF documents (printed) to ``sink``."""
    handler = logger.registered_handler
    if not isinstance(handler, logging.StreamHandler):
        raise TypeError(f"expected Powertools' stream handler, got {handler!r}")
    previous = handler.stream
    handler.setStream(sink)
    try:
        with redirect_stdout(sink):
            yield
    finally:
        handler.setStream(previous)


FETCH_OPTIONS = "options"
"""The folder under the state folder where each local run keeps the flags it was started with that change what it
may fetch (``CRAWL-RUN.json``): a resume must be given the same ones, and `sluice runs`/`show` print them."""


def fetch_flags(*, allow_loopback: bool) -> list[str]:
    """The ``sluice run`` flags that change what a run may fetch, as given (``--emulate-aws`` runs are never resumed,
    and no other flag widens or narrows the targets)."""
    return ["--allow-loopback"] if allow_loopback else []


def _options_file(state_dir: Path, crawl: str, run_id: str) -> Path:
    return state_dir / FETCH_OPTIONS / f"{crawl}-{run_id}.json"


def remember_flags(state_dir: Path, crawl: str, run_id: str, flags: list[str]) -> None:
    """Keep the run's fetch flags beside its state, written whole (a kill leaves the old file or the new one)."""
    path = _options_file(state_dir, crawl, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps({"flags": sorted(flags)}), encoding="utf-8")
    partial.replace(path)


def remembered_flags(state_dir: Path, crawl: str, run_id: str) -> list[str] | None:
    """The fetch flags the run was started with; None for a run started before runs kept them."""
    try:
        return list(json.loads(_options_file(state_dir, crawl, run_id).read_text(encoding="utf-8"))["flags"])
    except FileNotFoundError:
        return None


class FlagsDiffer(RuntimeError):
    """A resume given other fetch flags than its run was started with: refused before anything is fetched."""

    @classmethod
    def of(cls, run_id: str, started: list[str], given: list[str]) -> FlagsDiffer:
        missing = [f for f in started if f not in given]
        extra = [f for f in given if f not in started]
        said = [f"run {run_id} was started with {' '.join(started) or 'no fetch flag'}"]
        if missing:
            said.append(f"add {' '.join(missing)} to resume it")
        if extra:
            said.append(f"drop {' '.join(extra)} to resume it (it would widen what the run may fetch)")
        return cls("; ".join(said) + ", or pass --restart to close it as unfinished and start anew")

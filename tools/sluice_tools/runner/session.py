"""What every local run shares, whichever adapters it runs on: the state folder's lock, its logs, its result."""

from __future__ import annotations

import fcntl
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

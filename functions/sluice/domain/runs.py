"""Runs: one crawl's attempt at its whole frontier, opened under the crawl's lock and judged once.

A run holds no per-page counters: every URL's outcome is its own write (a
:class:`~sluice.domain.pages.PageResult`), and the run's counts are derived from those writes
when it is finalized. What the run item holds changes a handful of times per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from secrets import randbelow
from typing import Literal

RunStatus = Literal["running", "finalizing", "finished"]


class RunInFlight(Exception):
    """A crawl already has a run in flight; a second one is refused (the message says which and since when)."""


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by start time, unique by a random suffix: ``20261129T210000Z-3e72c1``.

    The suffix starts with the millisecond (three hex digits), so two runs started within one
    second still sort in start order and a quick re-run finds the run before it; three random
    hex digits follow.
    """
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{now.microsecond // 1000:03x}{randbelow(16**3):03x}"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class RunState:
    """A run as its ledger holds it."""

    crawl: str
    run_id: str
    status: RunStatus
    started_at: str
    deadline: str
    spec_digest: str
    seeding: bool = True
    """The scheduler is still fanning the seeds out (possibly over several invocations)."""
    seeds: int = 0
    """How many seed URLs the run's frontier holds (known once the fan-out is planned)."""
    fanned_out: int = 0
    """Seed tasks sent so far, as last recorded (a resumed fan-out continues from here)."""
    catalog_run: str | None = None
    """The finished run this one was seeded from: its pages, validators and records."""
    trigger: str | None = None
    checked_at: str | None = None
    """When the finalizer last found the run not drained (fetchers wait a while before asking again)."""
    checked_done: int | None = None
    """How many URLs were done then: the same count at the next check means the run stopped moving."""
    finalizing_at: str | None = None
    finished_at: str | None = None
    healthy: bool | None = None
    complete: bool | None = None
    """Finished with every URL done (not finalized as it stood at its deadline): fit to be a catalog."""
    records: int | None = None
    summary_key: str | None = None

    @property
    def overdue(self) -> bool:
        return datetime.fromisoformat(self.deadline) < datetime.now(UTC)

    def seconds_left(self) -> float:
        """Seconds until the run's deadline (negative once it passed)."""
        return (datetime.fromisoformat(self.deadline) - datetime.now(UTC)).total_seconds()

    def finalizing_for(self) -> float:
        """Seconds since finalizing began (0 if it has not)."""
        if self.finalizing_at is None:
            return 0.0
        return (datetime.now(UTC) - datetime.fromisoformat(self.finalizing_at)).total_seconds()

    def checked_within(self, seconds: float) -> bool:
        if self.checked_at is None:
            return False
        return (datetime.now(UTC) - datetime.fromisoformat(self.checked_at)).total_seconds() < seconds


@dataclass(frozen=True, slots=True)
class RunLock:
    """The item that says a crawl has a run in flight."""

    crawl: str
    run_id: str
    started_at: str
    deadline: str
    trigger: str | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """A run's progress as fetchers report it once per batch: a hint for the progress bar and the drain trigger.

    Exact where the store can count cheaply (the local store); on AWS the sum of sharded
    counters, each written once per invocation, which a fetcher that dies after counting its
    pages and before reporting them leaves low. The finalizer never trusts it: it counts.
    """

    claimed: int = 0
    """Links claimed for the run (seeds are counted on the run itself)."""
    done: int = 0
    records: int = 0
    failed: int = 0

    def pending(self, seeds: int) -> int:
        return seeds + self.claimed - self.done

    def __add__(self, other: Progress) -> Progress:
        return Progress(
            self.claimed + other.claimed,
            self.done + other.done,
            self.records + other.records,
            self.failed + other.failed,
        )

"""Runs: one crawl's attempt at its whole frontier, opened under the crawl's lock and judged once.

A run holds no per-page counters: every URL's outcome is its own write (a
:class:`~sluice.domain.pages.PageResult`), and the run's counts are derived from those writes
when it is finalized. What the run item holds changes a handful of times per run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from secrets import randbelow
from typing import Literal

from sluice.domain.clock import SYSTEM_CLOCK
from sluice.domain.errors import Conflict

RunStatus = Literal["running", "finalizing", "finished"]


class RunInFlight(Conflict):
    """A crawl already has a run in flight; a second one is refused (the message says which and since when)."""

    @classmethod
    def held_by(cls, lock: RunLock) -> RunInFlight:
        return cls(
            f"crawl {lock.crawl!r} already has run {lock.run_id} in flight since {lock.started_at} "
            f"(deadline {lock.deadline}); a second run is refused until it finishes or passes its deadline"
        )


def new_run_id(now: datetime) -> str:
    """Sortable by start time, unique by a random suffix: ``20261129T210000Z-3e72c1``.

    The suffix starts with the millisecond (three hex digits), so two runs started within one
    second still sort in start order and a quick re-run finds the run before it; three random
    hex digits follow.
    """
    return f"{now:%Y%m%dT%H%M%SZ}-{now.microsecond // 1000:03x}{randbelow(16**3):03x}"


def iso(moment: datetime) -> str:
    """How the ledgers store a moment: UTC, whole seconds (``2026-11-29T21:00:00+00:00``)."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


# The run rules: each written once, here, and called by every step and both ledgers. Each takes the time it
# judges by (``now``), so a caller (and a test) decides which clock that is.


def overdue(deadline: str, now: datetime) -> bool:
    """A run, or the crawl lock its run holds, is past its deadline: the sweep finalizes it as it stands, and
    a new run may take its crawl's lock.

    A ledger that asks its store to judge it states the same rule in the store's terms: ``deadline < :now``
    with ``:now`` = :func:`deadline_bound` (``now``) in a DynamoDB condition; the two agree because a stored
    deadline is :func:`iso` (UTC, whole seconds) and such strings sort as the moments they name, with the
    bound's fraction of a second, if any, sorting after the whole second (``+`` before ``.``).
    """
    return datetime.fromisoformat(deadline) < now


def deadline_bound(now: datetime) -> str:
    """``now`` as a store compares a stored deadline with it: ``deadline < deadline_bound(now)`` as strings is
    :func:`overdue` (``deadline``, ``now``) for every deadline written by :func:`iso`."""
    return now.astimezone(UTC).isoformat()


def pending(seeds: int, claimed: int, done: int) -> int:
    """URLs of a run not done yet: its seeds and the links claimed for it, less those with a result."""
    return seeds + claimed - done


def claim_room(max_pages: int, seeds: int, claimed: int) -> int:
    """Links a run may still claim under its spec's ``follow.max_pages``: the seeds count first."""
    return max(0, max_pages - seeds - claimed)


def finished(run: RunState, *, complete: bool = False) -> bool:
    """A finished run, and (``complete``) one that finished with every URL done: fit to be a catalog."""
    return run.status == "finished" and (bool(run.complete) or not complete)


def catalog_fresh(run: RunState, now: datetime, max_age_days: float) -> bool:
    """A finished run young enough to seed the next from: every URL entry of it is still there (they
    expire with the ledger's TTL, :func:`sluice.defaults.catalog_max_age_days`)."""
    return now - datetime.fromisoformat(run.started_at) <= timedelta(days=max_age_days)


def drained(run: RunState, progress: Callable[[], Progress]) -> bool:
    """The run looks done, so it is time to ask the finalizer (which counts exactly before it judges): still
    running, its fan-out complete, and no URL pending by the fetchers' progress. ``progress`` is read only
    when the run's state leaves the question open (it is a read of the progress counters)."""
    return run.status == "running" and not run.seeding and progress().pending(run.seeds) <= 0


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

    @classmethod
    def opened(
        cls,
        crawl: str,
        spec_digest: str,
        deadline: timedelta,
        *,
        trigger: str | None,
        catalog_run: str | None,
        now: datetime,
        run_id: str | None = None,
    ) -> RunState:
        """A run as it opens: running, seeding, due ``deadline`` from ``now``."""
        return cls(
            crawl=crawl,
            run_id=run_id or new_run_id(now),
            status="running",
            started_at=iso(now),
            deadline=iso(now + deadline),
            spec_digest=spec_digest,
            catalog_run=catalog_run,
            trigger=trigger,
        )

    @property
    def overdue(self) -> bool:
        """Past its deadline by the wall clock: for callers not yet passing the pipeline's clock; prefer
        :meth:`overdue_at` (``services.clock.now()``)."""
        return self.overdue_at(_or_wall(None))

    def overdue_at(self, now: datetime) -> bool:
        """Past its deadline at ``now`` (see :func:`overdue`)."""
        return overdue(self.deadline, now)

    def seconds_left(self, now: datetime | None = None) -> float:
        """Seconds from ``now`` until the run's deadline (negative once it passed)."""
        return (datetime.fromisoformat(self.deadline) - _or_wall(now)).total_seconds()

    def finalizing_for(self, now: datetime | None = None) -> float:
        """Seconds from when finalizing began until ``now`` (0 if it has not)."""
        if self.finalizing_at is None:
            return 0.0
        return (_or_wall(now) - datetime.fromisoformat(self.finalizing_at)).total_seconds()

    def checked_within(self, seconds: float, now: datetime | None = None) -> bool:
        """The finalizer found the run not drained less than ``seconds`` before ``now``."""
        if self.checked_at is None:
            return False
        return (_or_wall(now) - datetime.fromisoformat(self.checked_at)).total_seconds() < seconds


def _or_wall(now: datetime | None) -> datetime:
    """``now``, or the wall clock's for a caller that does not pass the pipeline's clock yet (the ``now=None``
    defaults above go once every step passes ``services.clock.now()``)."""
    return SYSTEM_CLOCK.now() if now is None else now


@dataclass(frozen=True, slots=True)
class RunLock:
    """The item that says a crawl has a run in flight."""

    crawl: str
    run_id: str
    started_at: str
    deadline: str
    trigger: str | None = None

    @classmethod
    def of(cls, run: RunState) -> RunLock:
        """The lock an opening run takes."""
        return cls(run.crawl, run.run_id, run.started_at, run.deadline, run.trigger)

    def overdue_at(self, now: datetime) -> bool:
        """Its run is past its deadline: the lock may be taken by a new run (see :func:`overdue`)."""
        return overdue(self.deadline, now)


PROGRESS_SHARDS = 16
"""Counters a run's progress is kept in on AWS, each fetcher batch adding to one at random (no hot item); a
progress read reads them all, which the cost estimate counts."""


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
        return pending(seeds, self.claimed, self.done)

    def __add__(self, other: Progress) -> Progress:
        return Progress(
            self.claimed + other.claimed,
            self.done + other.done,
            self.records + other.records,
            self.failed + other.failed,
        )

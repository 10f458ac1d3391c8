"""The run rules of ``domain/runs.py``, each on its own cases: the steps and both ledgers call these."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sluice.domain.runs import (
    Progress,
    RunLock,
    RunState,
    catalog_fresh,
    claim_room,
    deadline_bound,
    drained,
    finished,
    iso,
    overdue,
    pending,
)
from sluice.domain.tally import RunTally

NOW = datetime(2026, 12, 1, 21, 0, 0, 250_000, tzinfo=UTC)
RUN = RunState.opened("c", "digest", timedelta(hours=12), trigger=None, catalog_run=None, now=NOW)


def test_an_opened_run_is_running_seeding_and_due_its_deadline_from_now() -> None:
    assert (RUN.status, RUN.seeding, RUN.seeds) == ("running", True, 0)
    assert RUN.started_at == "2026-12-01T21:00:00+00:00"
    assert RUN.deadline == "2026-12-02T09:00:00+00:00"
    assert RUN.run_id.startswith("20261201T210000Z-0fa")  # the millisecond, 250, in three hex digits
    assert RunLock.of(RUN) == RunLock("c", RUN.run_id, RUN.started_at, RUN.deadline, None)


@pytest.mark.parametrize(
    ("after_deadline", "expected"),
    [
        (timedelta(hours=-1), False),
        (timedelta(microseconds=-1), False),
        (timedelta(0), False),
        (timedelta(microseconds=1), True),
        (timedelta(seconds=1), True),
    ],
)
def test_a_run_is_overdue_only_once_its_deadline_has_passed(after_deadline: timedelta, expected: bool) -> None:
    now = datetime.fromisoformat(RUN.deadline) + after_deadline
    assert overdue(RUN.deadline, now) is expected
    assert RUN.overdue_at(now) is expected
    assert RunLock.of(RUN).overdue_at(now) is expected
    # The bound a store compares a stored deadline with, as a string, says the same.
    assert (RUN.deadline < deadline_bound(now)) is expected


def test_pending_is_seeds_and_claims_not_done_alike_in_progress_and_tally() -> None:
    assert pending(seeds=10, claimed=5, done=12) == 3
    assert Progress(claimed=5, done=12).pending(10) == 3
    assert RunTally(seeds=10, links=5, seeds_done=9, links_done=3).pending == 3


@pytest.mark.parametrize(
    ("max_pages", "seeds", "claimed", "room"), [(100, 10, 0, 90), (100, 10, 85, 5), (100, 10, 90, 0), (5, 10, 0, 0)]
)
def test_the_room_for_links_is_what_max_pages_leaves_after_seeds_and_claims(
    max_pages: int, seeds: int, claimed: int, room: int
) -> None:
    assert claim_room(max_pages, seeds, claimed) == room


def test_a_catalog_must_be_finished_and_if_asked_complete() -> None:
    done = replace(RUN, status="finished", complete=True)
    cut = replace(RUN, status="finished", complete=False)
    assert [finished(r) for r in (RUN, done, cut)] == [False, True, True]
    assert [finished(r, complete=True) for r in (RUN, done, cut)] == [False, True, False]


def test_a_catalog_is_fresh_up_to_its_maximum_age() -> None:
    started = datetime.fromisoformat(RUN.started_at)
    assert catalog_fresh(RUN, started + timedelta(days=14), 14)
    assert not catalog_fresh(RUN, started + timedelta(days=14, seconds=1), 14)


class Reads:
    """A progress source that counts its reads (a read is one of the progress counters' batch reads)."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.reads = progress, 0

    def __call__(self) -> Progress:
        self.reads += 1
        return self.progress


def test_a_run_is_drained_when_running_seeded_and_nothing_is_pending() -> None:
    seeded = replace(RUN, seeding=False, seeds=3)
    assert drained(seeded, Reads(Progress(claimed=2, done=5)))
    assert not drained(seeded, Reads(Progress(claimed=2, done=4)))


@pytest.mark.parametrize(
    "run", [replace(RUN, seeds=3), replace(RUN, seeding=False, seeds=3, status="finalizing")], ids=["seeding", "final"]
)
def test_a_run_still_seeding_or_no_longer_running_is_not_drained_and_its_progress_is_not_read(run: RunState) -> None:
    reads = Reads(Progress(claimed=0, done=3))
    assert not drained(run, reads)
    assert reads.reads == 0


def test_iso_is_utc_whole_seconds() -> None:
    assert iso(NOW.astimezone(UTC)) == "2026-12-01T21:00:00+00:00"

"""The run rules as each ledger states them in its store's terms agree with the rule in ``domain/runs.py``.

The DynamoDB ledger takes a crawl's lock under a condition expression (``deadline < :now``), the SQLite
ledger reads the lock and asks the domain; the frontiers cap claims by ``follow.max_pages``; both pick
the latest finished run. Each case is run on moto and on SQLite and held to the domain's answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.ledger import SqliteRunLedger
from sluice.adapters.local.store import Database
from sluice.domain.clock import FixedClock
from sluice.domain.runs import Progress, RunInFlight, claim_room, finished, iso, overdue
from sluice.messages import UrlTask

from .conftest import moto_ledger

TABLE = "sluice-test-ledger"
OPENED = datetime(2026, 12, 1, 21, 0, 0, tzinfo=UTC)
"""When the holder's run opened (whole seconds, so its deadline is exactly ``OPENED + DEADLINE``)."""
DEADLINE = timedelta(hours=12)
DUE = OPENED + DEADLINE

Ledger = DynamoRunLedger | SqliteRunLedger
Frontier = DynamoFrontier | SqliteFrontier


@pytest.fixture
def clock() -> FixedClock:
    """The ledgers' time: it stands at ``OPENED`` until a test moves it."""
    return FixedClock(OPENED)


@pytest.fixture(params=["moto", "sqlite"])
def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: FixedClock
) -> Iterator[tuple[Ledger, Frontier]]:
    if request.param == "sqlite":
        db = Database(tmp_path)
        yield SqliteRunLedger(db, clock=clock), SqliteFrontier(db)
        return
    with moto_ledger(monkeypatch, TABLE):
        yield DynamoRunLedger(TABLE, clock=clock), DynamoFrontier(TABLE, ttl_days=15, writers=2, clock=clock)


AT = [
    DUE - timedelta(hours=1),
    DUE - timedelta(seconds=1),
    DUE - timedelta(microseconds=1),
    DUE,
    DUE + timedelta(microseconds=1),
    DUE + timedelta(milliseconds=500),
    DUE + timedelta(seconds=1),
    DUE + timedelta(days=3),
]


@pytest.mark.parametrize("now", AT, ids=lambda t: str(t - DUE))
def test_a_ledger_gives_the_lock_to_a_new_run_exactly_when_the_domain_calls_its_holder_overdue(
    store: tuple[Ledger, Frontier], now: datetime
) -> None:
    ledger, _ = store
    holder = ledger.open_run("c", "d", DEADLINE, trigger=None, catalog_run=None, now=OPENED)
    assert holder.deadline == iso(DUE)
    if overdue(holder.deadline, now):
        taken = ledger.open_run("c", "d", DEADLINE, trigger=None, catalog_run=None, now=now)
        holds = taken.run_id
    else:
        with pytest.raises(RunInFlight, match=holder.run_id):
            ledger.open_run("c", "d", DEADLINE, trigger=None, catalog_run=None, now=now)
        holds = holder.run_id
    lock = ledger.active_run("c")
    assert lock is not None
    assert lock.run_id == holds


def test_the_cases_span_both_answers() -> None:
    # Written out, so that the agreement above is not agreement on one answer only.
    assert [overdue(iso(DUE), now) for now in AT] == [False, False, False, False, True, True, True, True]


@pytest.mark.parametrize(
    ("max_pages", "seeds", "claimed"), [(100, 3, 0), (10, 3, 4), (10, 3, 7), (10, 3, 9), (2, 5, 0)]
)
def test_a_frontier_claims_as_many_links_as_the_domain_leaves_room_for(
    store: tuple[Ledger, Frontier], max_pages: int, seeds: int, claimed: int
) -> None:
    _, frontier = store
    run_id = "20261201T210000Z-000000"
    before = [UrlTask(url=f"https://example.com/before/{n}", depth=1, origin="link") for n in range(claimed)]
    if before:
        won = frontier.claim(run_id, before, seeds=seeds, max_pages=1_000)
        frontier.add_progress(run_id, Progress(claimed=len(won.won)))  # as a fetcher reports its claims
    tasks = [UrlTask(url=f"https://example.com/page/{n}", depth=1, origin="link") for n in range(8)]
    claims = frontier.claim(run_id, tasks, seeds=seeds, max_pages=max_pages)
    room = claim_room(max_pages, seeds, claimed)
    assert len(claims.won) == min(len(tasks), room)
    assert [t.url for t in claims.capped] == [t.url for t in tasks[room:]]


@pytest.mark.parametrize("complete", [False, True])
def test_a_ledger_finds_the_latest_run_the_domain_calls_finished(
    store: tuple[Ledger, Frontier], complete: bool
) -> None:
    ledger, _ = store
    outcomes = [True, False, None]  # oldest first: a complete run, an unfinished one, one still running
    runs = []
    for n, whole in enumerate(outcomes):
        run = ledger.open_run(
            "c", "d", DEADLINE, trigger=None, catalog_run=None, now=OPENED + timedelta(days=n, hours=13)
        )
        if whole is not None:
            ledger.finish("c", run.run_id, healthy=True, complete=whole, records=0, summary_key="k")
        runs.append(ledger.get_run("c", run.run_id))
    expected = next((r for r in reversed(runs) if r is not None and finished(r, complete=complete)), None)
    assert expected is not None
    want = runs[0] if complete else runs[1] or runs[0]
    assert want is not None
    assert expected.run_id == want.run_id
    found = ledger.latest_finished("c", complete=complete)
    assert found is not None
    assert found.run_id == expected.run_id


def test_a_ledger_begins_finalizing_a_running_run_once_and_reextracts_only_a_finished_one(
    store: tuple[Ledger, Frontier],
) -> None:
    ledger, _ = store
    run = ledger.open_run("c", "d", DEADLINE, trigger=None, catalog_run=None, now=OPENED)
    assert not ledger.reextracted("c", run.run_id, spec_digest="e", healthy=True, records=1)
    assert ledger.begin_finalizing("c", run.run_id)
    assert not ledger.begin_finalizing("c", run.run_id)
    assert not ledger.begin_finalizing("c", "20261201T210000Z-ffffff")  # no such run
    ledger.finish("c", run.run_id, healthy=False, complete=True, records=0, summary_key="k")
    assert ledger.reextracted("c", run.run_id, spec_digest="e", healthy=True, records=1)
    again = ledger.get_run("c", run.run_id)
    assert again is not None
    assert (again.status, again.spec_digest, again.healthy, again.records) == ("finished", "e", True, 1)


def test_every_moment_a_ledger_stamps_on_a_run_is_its_clocks(store: tuple[Ledger, Frontier], clock: FixedClock) -> None:
    ledger, _ = store
    run = ledger.open_run("c", "d", DEADLINE, trigger=None, catalog_run=None)  # no ``now``: the ledger's clock
    assert (run.started_at, run.deadline) == (iso(OPENED), iso(DUE))
    clock.advance(60)
    ledger.checked("c", run.run_id, 3)
    clock.advance(60)
    assert ledger.begin_finalizing("c", run.run_id)
    clock.advance(60)
    ledger.finish("c", run.run_id, healthy=True, complete=True, records=0, summary_key="k")

    stamped = ledger.get_run("c", run.run_id)
    assert stamped is not None
    assert (stamped.checked_at, stamped.finalizing_at, stamped.finished_at) == (
        iso(OPENED + timedelta(seconds=60)),
        iso(OPENED + timedelta(seconds=120)),
        iso(OPENED + timedelta(seconds=180)),
    )
    assert stamped.checked_within(61, clock.now() - timedelta(seconds=60))
    assert stamped.finalizing_for(clock.now()) == 60.0

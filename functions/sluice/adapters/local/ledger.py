"""Runs and crawl locks in the state folder's SQLite file: :class:`sluice.ports.RunLedger` for ``sluice run``."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any

from sluice.adapters.local.errors import local_errors
from sluice.adapters.local.store import Database
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.runs import RunInFlight, RunLock, RunState, finished, iso


@local_errors
class SqliteRunLedger:
    """:class:`sluice.ports.RunLedger` on SQLite (the lock and the run are created in one transaction)."""

    def __init__(self, db: Database, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._db = db
        self._clock = clock
        """The pipeline's time: runs open, are checked, finalize and finish by it (unless a caller says when)."""

    def open_run(
        self,
        crawl: str,
        spec_digest: str,
        deadline: timedelta,
        *,
        trigger: str | None,
        catalog_run: str | None,
        run_id: str | None = None,
        now: datetime | None = None,
    ) -> RunState:
        now = now or self._clock.now()
        state = RunState.opened(
            crawl, spec_digest, deadline, trigger=trigger, catalog_run=catalog_run, now=now, run_id=run_id
        )
        lock = RunLock.of(state)
        with self._db.transaction() as db:
            row = db.execute(
                "SELECT crawl, run_id, started_at, deadline, trigger FROM locks WHERE crawl = ?", (crawl,)
            ).fetchone()
            if row is not None and not (holder := RunLock(*row)).overdue_at(now):
                raise RunInFlight.held_by(holder)
            db.execute(
                "INSERT OR REPLACE INTO locks (crawl, run_id, started_at, deadline, trigger) VALUES (?, ?, ?, ?, ?)",
                (lock.crawl, lock.run_id, lock.started_at, lock.deadline, lock.trigger),
            )
            db.execute("INSERT INTO runs (crawl, run_id, state) VALUES (?, ?, ?)", (crawl, state.run_id, _dump(state)))
        return state

    def get_run(self, crawl: str, run_id: str) -> RunState | None:
        with self._db.reading() as db:
            row = db.execute("SELECT state FROM runs WHERE crawl = ? AND run_id = ?", (crawl, run_id)).fetchone()
        return _load(row[0]) if row else None

    def active_run(self, crawl: str) -> RunLock | None:
        with self._db.reading() as db:
            row = db.execute(
                "SELECT crawl, run_id, started_at, deadline, trigger FROM locks WHERE crawl = ?", (crawl,)
            ).fetchone()
        return RunLock(*row) if row else None

    def active_runs(self) -> list[RunLock]:
        with self._db.reading() as db:
            rows = db.execute(
                "SELECT crawl, run_id, started_at, deadline, trigger FROM locks ORDER BY crawl"
            ).fetchall()
        return [RunLock(*row) for row in rows]

    def latest_finished(
        self, crawl: str, before_run_id: str | None = None, *, complete: bool = False
    ) -> RunState | None:
        with self._db.reading() as db:
            rows = db.execute(
                "SELECT state FROM runs WHERE crawl = ? AND run_id < ? ORDER BY run_id DESC",
                (crawl, before_run_id or "\uffff"),
            ).fetchall()
        for (raw,) in rows:
            run = _load(raw)
            if finished(run, complete=complete):
                return run
        return None

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        """The crawl's last ``limit`` runs, newest first (run ids sort by start time)."""
        with self._db.reading() as db:
            rows = db.execute(
                "SELECT state FROM runs WHERE crawl = ? ORDER BY run_id DESC LIMIT ?", (crawl, limit)
            ).fetchall()
        return [_load(raw) for (raw,) in rows]

    def find_run(self, run_id: str) -> RunState | None:
        """A run by its id alone (run ids are unique across crawls)."""
        with self._db.reading() as db:
            row = db.execute("SELECT state FROM runs WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
        return _load(row[0]) if row else None

    def crawls(self) -> list[str]:
        """Every crawl that has run on this state folder."""
        with self._db.reading() as db:
            return [crawl for (crawl,) in db.execute("SELECT DISTINCT crawl FROM runs ORDER BY crawl")]

    def set_seeds(self, crawl: str, run_id: str, seeds: int) -> None:
        self._change(crawl, run_id, seeds=seeds)

    def fanned_out(self, crawl: str, run_id: str, offset: int) -> None:
        self._change(crawl, run_id, fanned_out=offset)

    def seeded(self, crawl: str, run_id: str) -> RunState | None:
        return self._change(crawl, run_id, seeding=False)

    def checked(self, crawl: str, run_id: str, done: int) -> None:
        self._change(crawl, run_id, checked_at=iso(self._clock.now()), checked_done=done)

    def begin_finalizing(self, crawl: str, run_id: str) -> bool:
        changed = self._change(crawl, run_id, when="running", status="finalizing", finalizing_at=iso(self._clock.now()))
        return changed is not None

    def finish(self, crawl: str, run_id: str, *, healthy: bool, complete: bool, records: int, summary_key: str) -> None:
        with self._db.transaction() as db:
            self._change_in(
                db,
                crawl,
                run_id,
                None,
                {
                    "status": "finished",
                    "finished_at": iso(self._clock.now()),
                    "healthy": healthy,
                    "complete": complete,
                    "records": records,
                    "summary_key": summary_key,
                },
            )
            db.execute("DELETE FROM locks WHERE crawl = ? AND run_id = ?", (crawl, run_id))

    def reextracted(self, crawl: str, run_id: str, *, spec_digest: str, healthy: bool, records: int) -> bool:
        changes = {"spec_digest": spec_digest, "healthy": healthy, "records": records}
        return self._change(crawl, run_id, when="finished", **changes) is not None

    def _change(self, crawl: str, run_id: str, *, when: str | None = None, **changes: Any) -> RunState | None:
        with self._db.transaction() as db:
            return self._change_in(db, crawl, run_id, when, changes)

    @staticmethod
    def _change_in(db: Any, crawl: str, run_id: str, when: str | None, changes: dict[str, Any]) -> RunState | None:
        """Change a run (only if its status is ``when``, when given); the run as changed, or None."""
        row = db.execute("SELECT state FROM runs WHERE crawl = ? AND run_id = ?", (crawl, run_id)).fetchone()
        if row is None:
            return None
        run = _load(row[0])
        if when is not None and run.status != when:
            return None
        run = dataclasses.replace(run, **changes)
        db.execute("UPDATE runs SET state = ? WHERE crawl = ? AND run_id = ?", (_dump(run), crawl, run_id))
        return run


def _dump(run: RunState) -> str:
    return json.dumps(dataclasses.asdict(run), sort_keys=True)


def _load(raw: str) -> RunState:
    return RunState(**json.loads(raw))

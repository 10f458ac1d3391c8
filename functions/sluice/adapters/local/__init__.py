"""The ports on one machine: a SQLite file (ledger, URLs, queue, records), a folder of objects, and
secrets from the environment.

``sluice run`` uses it by default: the same pipeline steps as the deployed stack, durable after
every batch, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.hosts import SqliteHostBook
from sluice.adapters.local.ledger import SqliteRunLedger
from sluice.adapters.local.objects import FileObjects
from sluice.adapters.local.queue import SqliteQueue
from sluice.adapters.local.records import SqliteRecords
from sluice.adapters.local.secrets import EnvSecrets
from sluice.adapters.local.store import Database
from sluice.pipeline.services import Services, Trigger, Tuning


@dataclass
class LocalStore:
    """Every local adapter on one state folder."""

    folder: Path
    db: Database
    ledger: SqliteRunLedger
    frontier: SqliteFrontier
    queue: SqliteQueue
    objects: FileObjects
    records: SqliteRecords
    hosts: SqliteHostBook

    @classmethod
    def open(cls, folder: Path, *, urls_per_message: int = 10, max_receive_count: int = 5) -> LocalStore:
        db = Database(folder)
        return cls(
            folder=folder,
            db=db,
            ledger=SqliteRunLedger(db),
            frontier=SqliteFrontier(db),
            queue=SqliteQueue(db, urls_per_message=urls_per_message, max_receive_count=max_receive_count),
            objects=FileObjects(folder / "objects"),
            records=SqliteRecords(db),
            hosts=SqliteHostBook(db),
        )

    def services(
        self,
        specs_dir: Path,
        tuning: Tuning,
        *,
        finalize_later: Trigger,
        continue_start: Trigger,
        clock: Callable[[], float] = time.time,
    ) -> Services:
        return Services(
            tuning=tuning,
            ledger=self.ledger,
            frontier=self.frontier,
            queue=self.queue,
            objects=self.objects,
            records=self.records,
            hosts=self.hosts,
            secrets=EnvSecrets(),
            specs_dir=specs_dir,
            finalize_later=finalize_later,
            continue_start=continue_start,
            clock=clock,
        )

    def close(self) -> None:
        self.db.close()

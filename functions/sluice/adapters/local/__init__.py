"""The ports on one machine: a SQLite file (ledger, URLs, queue, records), a folder of objects, and
secrets from the environment.

``sluice run`` uses it by default: the same pipeline steps as the deployed stack, durable after
every batch, so a killed run resumes where it stopped.
"""

from __future__ import annotations

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
from sluice.domain.clock import SYSTEM_CLOCK, Clock
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
    clock: Clock
    """The pipeline's time: the ledger and the queue were built with it, and :meth:`services` hands it on."""

    @classmethod
    def open(
        cls, folder: Path, *, urls_per_message: int = 10, max_receive_count: int = 5, clock: Clock = SYSTEM_CLOCK
    ) -> LocalStore:
        db = Database(folder)
        return cls(
            folder=folder,
            db=db,
            ledger=SqliteRunLedger(db, clock=clock),
            frontier=SqliteFrontier(db),
            queue=SqliteQueue(db, urls_per_message=urls_per_message, max_receive_count=max_receive_count, clock=clock),
            objects=FileObjects(folder / "objects"),
            records=SqliteRecords(db),
            hosts=SqliteHostBook(db),
            clock=clock,
        )

    def services(
        self, specs_dir: Path, tuning: Tuning, *, finalize_later: Trigger, continue_start: Trigger
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
            clock=self.clock,
        )

    def close(self) -> None:
        self.db.close()

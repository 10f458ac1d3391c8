"""What the runner's workers know of each target host, one row per host (``sluice.ports.HostBook``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sluice.adapters.local.errors import local_errors
from sluice.adapters.local.store import Database
from sluice.domain.hosts import HostState


@local_errors
class SqliteHostBook:
    """:class:`sluice.ports.HostBook` on SQLite; a write is kept only if the stored version is the one read."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def load(self, hosts: Sequence[str]) -> dict[str, HostState]:
        wanted = list(dict.fromkeys(hosts))
        found: dict[str, HostState] = {}
        with self._db.reading() as db:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for host, state in db.execute(f"SELECT host, state FROM hosts WHERE host IN ({marks})", chunk):  # noqa: S608 - placeholders only
                    found[host] = HostState.from_json(host, json.loads(state))
        return found

    def save(self, states: Sequence[HostState]) -> int:
        written = 0
        with self._db.transaction() as db:
            for state in states:
                row = db.execute("SELECT state FROM hosts WHERE host = ?", (state.host,)).fetchone()
                stored = 0 if row is None else int(json.loads(row[0]).get("v") or 0)
                if stored != state.version:
                    continue  # another worker held the host meanwhile: its state stands
                data = json.dumps({**state.to_json(), "v": state.version + 1}, separators=(",", ":"))
                db.execute("INSERT OR REPLACE INTO hosts (host, state) VALUES (?, ?)", (state.host, data))
                written += 1
        return written

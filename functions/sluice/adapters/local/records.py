"""The records table in SQLite: each key's current record, for specs with ``output.records_table``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sluice.adapters.local.store import Database
from sluice.extraction.extract import Record


class SqliteRecords:
    """:class:`sluice.ports.RecordsTable` on SQLite."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def upsert(self, crawl: str, run_id: str, records: Sequence[Record]) -> None:
        with self._db.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO records (crawl, record_key, content_hash, data, run_id, page) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        crawl,
                        r.key,
                        r.content_hash,
                        json.dumps(r.data, ensure_ascii=False, sort_keys=True),
                        run_id,
                        r.page_url,
                    )
                    for r in records
                ],
            )

    def get(self, crawl: str, key: str) -> Mapping[str, object] | None:
        with self._db.reading() as db:
            row = db.execute(
                "SELECT content_hash, data, run_id, page FROM records WHERE crawl = ? AND record_key = ?", (crawl, key)
            ).fetchone()
        if row is None:
            return None
        return {"record_key": key, "content_hash": row[0], "data": row[1], "run_id": row[2], "page": row[3]}

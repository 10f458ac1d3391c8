"""The records table in SQLite: each key's current record, for specs with ``output.records_table``.

The stored key is the record's key within its type (the key itself for a one-type spec), as on DynamoDB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.adapters.local.errors import local_errors
from sluice.adapters.local.store import Database
from sluice.extraction.extract import Record, record_identity
from sluice.jsontext import json_text

_DATA_JSON = json_text(ensure_ascii=False, sort_keys=True)
"""``json.dumps(data, ensure_ascii=False, sort_keys=True)``, its encoder built once (``json.dumps`` builds one
a call)."""


@local_errors
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
                        r.identity,
                        r.content_hash,
                        _DATA_JSON(r.data),
                        run_id,
                        r.page_url,
                    )
                    for r in records
                ],
            )

    def get(self, crawl: str, key: str, type_: str | None = None) -> Mapping[str, object] | None:
        with self._db.reading() as db:
            row = db.execute(
                "SELECT content_hash, data, run_id, page FROM records WHERE crawl = ? AND record_key = ?",
                (crawl, record_identity(key, type_)),
            ).fetchone()
        if row is None:
            return None
        found: dict[str, object] = {"record_key": key, "content_hash": row[0], "data": row[1], "run_id": row[2]}
        return found | {"page": row[3], **({"record_type": type_} if type_ is not None else {})}

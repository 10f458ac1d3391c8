"""The records table: each key's current record, for specs that switch it on (``output.records_table``).

A record's item is its key within its type (:func:`~sluice.extraction.extract.record_identity`: the
key itself for a one-type spec), so a listing card and the book page sharing a key are two items.
Only new and changed records are written (the fetcher tells them apart by the digests the
catalog run left), 25 to a ``BatchWriteItem``: one write unit per record of up to 1 KB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluice.adapters.aws import codec, keys
from sluice.adapters.aws.batch import batch_write
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors
from sluice.adapters.aws.items import from_item, to_item
from sluice.extraction.extract import Record, record_identity

_BATCH = 25


@aws_errors
class DynamoRecords:
    """:class:`sluice.ports.RecordsTable` on its own table."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._db = client("dynamodb")

    def upsert(self, crawl: str, run_id: str, records: Sequence[Record]) -> None:
        for start in range(0, len(records), _BATCH):
            puts = [
                {"PutRequest": {"Item": to_item(codec.record_item(crawl, run_id, r))}}
                for r in records[start : start + _BATCH]
            ]
            batch_write(self._db, self.table, puts)

    def get(self, crawl: str, key: str, type_: str | None = None) -> Mapping[str, object] | None:
        item_key = keys.record(crawl, record_identity(key, type_))
        answer = self._db.get_item(TableName=self.table, Key=to_item(item_key))
        return from_item(answer["Item"]) if "Item" in answer else None

"""What one DynamoDB call costs in request units, from the sizes of the items it read or wrote.

Writes (read-write-operations.html, "Capacity unit consumption for write operations"): a put,
update or delete costs the larger of the item before and after, in 1 KB units. A write whose
condition fails still costs, on the existing item's size with a minimum of 1 (WorkingWithItems.html,
"Conditional writes"; Amazon Keyspaces documents the same for its failed conditional writes).
BatchWriteItem costs each item on its own; TransactWriteItems twice per item, ConditionCheck
included. Reads are sized on whole items, whatever a projection returns (read-write-operations.html).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from sluice.domain.cost import TRANSACTION_FACTOR, read_units, write_units
from sluice_tools.meter.dynamo_requests import ItemId, ItemWrite, item_id, item_reads, item_writes
from sluice_tools.meter.dynamo_size import item_size
from sluice_tools.meter.moto_tables import MotoTables

BILLED_FAILURES = frozenset(
    {"ConditionalCheckFailedException", "TransactionCanceledException", "TransactionConflictException"}
)
"""Failures DynamoDB reaches the item for, so they cost write units; a malformed request costs none."""
SizedWrite = tuple[ItemWrite, int]


@dataclass(frozen=True)
class Charge:
    """Units one call spent on one table; ``partition`` (writes only) is the partition key's prefix."""

    table: str
    wru: int = 0
    rru: float = 0.0
    partition: str | None = None


def sizes_before(operation: str, params: Mapping[str, Any], tables: MotoTables) -> list[SizedWrite]:
    """Each item a write will touch, with its stored size now (0 if it does not exist yet)."""
    return [(w, tables.stored_size(w.table, w.key)) for w in item_writes(operation, params, tables.key_schema)]


def write_charges(
    operation: str,
    before: Sequence[SizedWrite],
    response: Mapping[str, Any] | None,
    error: BaseException | None,
    tables: MotoTables,
) -> list[Charge]:
    """WRU per item written, from the sizes before (measured by :func:`sizes_before`) and after the call."""
    if error is not None and error_code(error) not in BILLED_FAILURES:
        return []
    factor = TRANSACTION_FACTOR if operation == "TransactWriteItems" else 1
    unprocessed = _unprocessed_writes(response, tables)
    charges: list[Charge] = []
    for write, size_before in before:
        if item_id(write.table, write.key) in unprocessed:
            continue
        size = size_before if error is not None else max(size_before, _size_after(write, tables))
        charges.append(
            Charge(write.table, wru=factor * write_units(size), partition=_partition(write, tables)),
        )
    return charges


def read_charges(
    operation: str, params: Mapping[str, Any], response: Mapping[str, Any] | None, tables: MotoTables
) -> tuple[list[Charge], bool]:
    """RRU per table for a successful read, and whether it read items it did not return (so could not size)."""
    if response is None:
        return [], False
    if operation in ("Query", "Scan"):
        items: list[Mapping[str, Any]] = response.get("Items", [])
        table: str = params["TableName"]
        total = sum(_read_size(table, item, params.get("IndexName"), tables) for item in items)
        rru = read_units(total, consistent=bool(params.get("ConsistentRead", False)))
        return [Charge(table, rru=rru)], int(response.get("ScannedCount", len(items))) > len(items)
    factor = TRANSACTION_FACTOR if operation == "TransactGetItems" else 1
    unprocessed = {
        item_id(name, key) for name, spec in response.get("UnprocessedKeys", {}).items() for key in spec["Keys"]
    }
    reads = [read for read in item_reads(operation, params) if item_id(read.table, read.key) not in unprocessed]
    sizes = [tables.stored_size(read.table, read.key) for read in reads]
    return [
        Charge(read.table, rru=factor * read_units(size, consistent=read.consistent))
        for read, size in zip(reads, sizes, strict=True)
    ], False


def error_code(error: BaseException | None) -> str | None:
    if isinstance(error, ClientError):
        code: str | None = error.response.get("Error", {}).get("Code")
        return code
    return None


def _size_after(write: ItemWrite, tables: MotoTables) -> int:
    if write.action == "Put" and write.item is not None:
        return item_size(write.item)
    if write.action == "Delete":
        return 0
    return tables.stored_size(write.table, write.key)  # an update as applied; a condition check leaves it


def _partition(write: ItemWrite, tables: MotoTables) -> str | None:
    schema = tables.key_schema(write.table)
    if schema is None or schema.partition not in write.key:
        return None
    ((_, value),) = write.key[schema.partition].items()
    return str(value).split("#", 1)[0]


def _read_size(table: str, item: Mapping[str, Any], index: str | None, tables: MotoTables) -> int:
    """A table read costs the whole stored item whatever the projection; an index read, the entry it holds."""
    schema = None if index else tables.key_schema(table)
    key = None if schema is None else schema.key_of(item)
    stored = None if key is None else tables.stored_item(table, key)
    return item_size(stored if stored is not None else item)


def _unprocessed_writes(response: Mapping[str, Any] | None, tables: MotoTables) -> set[ItemId]:
    if response is None:
        return set()
    batch = {"RequestItems": response.get("UnprocessedItems", {})}
    return {item_id(w.table, w.key) for w in item_writes("BatchWriteItem", batch, tables.key_schema)}

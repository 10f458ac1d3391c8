"""The items a DynamoDB request writes or reads, named by table and key, read from the request's own parameters."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from sluice_tools.meter.moto_tables import KeySchema

WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
Action = Literal["Put", "Update", "Delete", "ConditionCheck"]
Key = Mapping[str, Mapping[str, Any]]
SchemaOf = Callable[[str], KeySchema | None]
_TRANSACT_ACTIONS: tuple[Action, ...] = ("Put", "Update", "Delete", "ConditionCheck")


@dataclass(frozen=True)
class ItemWrite:
    """One item a write request touches; ``item`` is the new item of a Put."""

    table: str
    key: Key
    action: Action
    item: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ItemRead:
    """One item a GetItem, BatchGetItem or TransactGetItems asks for by key."""

    table: str
    key: Key
    consistent: bool


@dataclass(frozen=True, order=True)
class ItemId:
    """An item's identity, hashable: its table and its key values as text."""

    table: str
    key: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return " ".join([self.table, *(f"{name}={value}" for name, value in self.key)])


def item_id(table: str, key: Key) -> ItemId:
    """The same item whatever the spelling of its key (``{"N": "1.0"}`` is ``{"N": "1"}``)."""
    return ItemId(table, tuple((name, _text(value)) for name, value in sorted(key.items())))


def item_writes(operation: str, params: Mapping[str, Any], schema_of: SchemaOf) -> list[ItemWrite]:
    """Every item a write request touches, in request order; items of unknown tables are left out."""
    match operation:
        case "PutItem":
            return _put(params["TableName"], params["Item"], schema_of)
        case "UpdateItem" | "DeleteItem":
            action: Action = "Update" if operation == "UpdateItem" else "Delete"
            return [ItemWrite(params["TableName"], params["Key"], action)]
        case "BatchWriteItem":
            writes: list[ItemWrite] = []
            for table, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        writes += _put(table, request["PutRequest"]["Item"], schema_of)
                    elif "DeleteRequest" in request:
                        writes.append(ItemWrite(table, request["DeleteRequest"]["Key"], "Delete"))
            return writes
        case "TransactWriteItems":
            return _transaction(params.get("TransactItems", []), schema_of)
    return []


def item_reads(operation: str, params: Mapping[str, Any]) -> list[ItemRead]:
    """Every item a keyed read asks for; ``ConsistentRead`` defaults to false, transactions read consistently."""
    match operation:
        case "GetItem":
            return [ItemRead(params["TableName"], params["Key"], bool(params.get("ConsistentRead", False)))]
        case "BatchGetItem":
            return [
                ItemRead(table, key, bool(spec.get("ConsistentRead", False)))
                for table, spec in params.get("RequestItems", {}).items()
                for key in spec.get("Keys", [])
            ]
        case "TransactGetItems":
            return [
                ItemRead(entry["Get"]["TableName"], entry["Get"]["Key"], True)
                for entry in params.get("TransactItems", [])
                if "Get" in entry
            ]
    return []


def _put(table: str, item: Mapping[str, Any], schema_of: SchemaOf) -> list[ItemWrite]:
    schema = schema_of(table)
    key = None if schema is None else schema.key_of(item)
    return [] if key is None else [ItemWrite(table, key, "Put", item)]


def _transaction(entries: Sequence[Mapping[str, Any]], schema_of: SchemaOf) -> list[ItemWrite]:
    writes: list[ItemWrite] = []
    for entry in entries:
        for action in _TRANSACT_ACTIONS:
            if action not in entry:
                continue
            body = entry[action]
            if action == "Put":
                writes += _put(body["TableName"], body["Item"], schema_of)
            else:
                writes.append(ItemWrite(body["TableName"], body["Key"], action))
    return writes


def _text(value: Mapping[str, Any]) -> str:
    ((kind, raw),) = value.items()
    if kind == "N":
        return str(Decimal(raw).normalize())
    if kind == "B":
        data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        return base64.b64encode(data).decode("ascii")
    return str(raw)

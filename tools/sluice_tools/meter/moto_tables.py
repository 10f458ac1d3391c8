"""DynamoDB tables and items as moto holds them, read from its in-memory backend rather than through the API.

The meter needs an item's size before and after a write, and the key schema to name the item a
write touches; asking through a client would be a call of its own, observed and metered. This is
the one module that knows moto's internals (``moto.dynamodb.models``: ``dynamodb_backends``,
``Table.hash_key_attr``/``range_key_attr``/``items``, ``DynamoType.type``/``value``).
It reads and never writes: ``Table.get_item`` would add an empty partition to moto's defaultdict.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.dynamodb.exceptions import ResourceNotFoundException
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from sluice_tools.meter.dynamo_size import item_size

MOTO_ACCOUNT = "123456789012"
"""The account moto serves when credentials name no other (``moto.core.models.DEFAULT_ACCOUNT_ID``)."""


@dataclass(frozen=True)
class KeySchema:
    """A table's key attribute names."""

    partition: str
    sort: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.partition,) if self.sort is None else (self.partition, self.sort)

    def key_of(self, item: Mapping[str, Any]) -> dict[str, Any] | None:
        """The key attributes of ``item``, or None if it lacks one (the write will be refused anyway)."""
        if not all(name in item for name in self.names):
            return None
        return {name: item[name] for name in self.names}


@dataclass(frozen=True)
class MotoTables:
    """One account and region of moto's DynamoDB backend."""

    region: str
    account: str = MOTO_ACCOUNT

    def key_schema(self, table: str) -> KeySchema | None:
        """The table's key schema, or None if moto has no such table (by name or ARN)."""
        found = self._table(table)
        if found is None:
            return None
        return KeySchema(partition=found.hash_key_attr, sort=found.range_key_attr)

    def stored_item(self, table: str, key: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
        """The item with ``key`` as moto holds it now, in wire format with binary values as raw bytes."""
        found = self._table(table)
        if found is None or found.hash_key_attr not in key:
            return None
        partition = found.items.get(DynamoType(_moto_value(key[found.hash_key_attr])))
        if found.range_key_attr is None:
            stored = partition
        elif isinstance(partition, dict) and found.range_key_attr in key:
            stored = partition.get(DynamoType(_moto_value(key[found.range_key_attr])))
        else:
            stored = None
        if not isinstance(stored, Item):
            return None
        # dict() copies in one step, so a writer on another thread cannot change it mid-iteration.
        return {name: _wire(value) for name, value in dict(stored.attrs).items()}

    def stored_size(self, table: str, key: Mapping[str, Mapping[str, Any]]) -> int:
        """Bytes of the stored item with ``key``; 0 if there is none."""
        stored = self.stored_item(table, key)
        return 0 if stored is None else item_size(stored)

    def _table(self, table: str) -> Any:
        try:
            return dynamodb_backends[self.account][self.region].get_table(table)
        except ResourceNotFoundException:
            return None


def _moto_value(value: Mapping[str, Any]) -> dict[str, Any]:
    """A key value as moto stores it: binary as the base64 text that came over the wire."""
    ((kind, raw),) = value.items()
    if kind == "B" and isinstance(raw, bytes | bytearray):
        return {"B": base64.b64encode(raw).decode("ascii")}
    if kind == "B" and isinstance(raw, str):
        return {"B": base64.b64encode(raw.encode("utf-8")).decode("ascii")}
    return {kind: raw}


def _wire(value: Any) -> dict[str, Any]:
    """A moto ``DynamoType`` back in wire format, binary decoded to its raw bytes."""
    kind: str = value.type
    raw: Any = value.value
    match kind:
        case "B":
            return {"B": _decoded(raw)}
        case "BS":
            return {"BS": [_decoded(element) for element in raw]}
        case "L":
            return {"L": [_wire(_typed(element)) for element in raw]}
        case "M":
            return {"M": {name: _wire(_typed(element)) for name, element in raw.items()}}
    return {kind: raw}


def _typed(element: Any) -> Any:
    """moto wraps list and map elements as ``DynamoType`` when it builds one; wrap any it did not."""
    return element if isinstance(element, DynamoType) else DynamoType(element)


def _decoded(raw: bytes | str) -> bytes:
    return raw if isinstance(raw, bytes) else base64.b64decode(raw)

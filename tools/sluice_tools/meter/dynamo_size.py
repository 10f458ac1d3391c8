"""DynamoDB item sizes and the request units they cost, by the rules AWS publishes.

Sizes follow the Developer Guide, "DynamoDB item sizes and formats"
(amazondynamodb/latest/developerguide/CapacityUnitCalculations.html); units follow "DynamoDB read
and write operations" (read-write-operations.html) and the on-demand pricing page: a write unit
covers 1 KB, a read unit 4 KB strongly consistent or 8 KB eventually consistent, and a transaction
costs two units per item. The size rules (``sluice.adapters.aws.sizes``) and the unit arithmetic
(``sluice.domain.cost``) are the summary's own: one rule for the estimate and the meter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from sluice.adapters.aws.sizes import item_bytes
from sluice.adapters.aws.sizes import number_bytes as number_size
from sluice.domain.cost import read_units

__all__ = ["Item", "batch_read_units", "item_size", "number_size", "value_size"]

Item = Mapping[str, Mapping[str, Any]]
"""An item in DynamoDB's wire format: ``{"pk": {"S": "crawl#books"}, "done": {"N": "3"}}``."""


def item_size(item: Item) -> int:
    """Bytes DynamoDB counts for ``item``: each attribute's UTF-8 name plus its value
    (:func:`sluice.adapters.aws.sizes.item_bytes`, the rules the run's estimate sizes by)."""
    return item_bytes({name: _plain(value) for name, value in item.items()})


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value, without its name."""
    return item_size({"": value})


def _plain(value: Mapping[str, Any]) -> Any:
    """A wire value as the plain value it is sized as: a number keeps the digits it was sent with (a Decimal),
    a binary sent as text is its UTF-8 bytes, a set is a set."""
    ((kind, raw),) = value.items()
    match kind:
        case "S":
            return str(raw)
        case "N":
            return Decimal(raw)
        case "B":
            return _raw_bytes(raw)
        case "BOOL":
            return bool(raw)
        case "NULL":
            return None
        case "L":
            return [_plain(element) for element in raw]
        case "M":
            return {key: _plain(element) for key, element in raw.items()}
        case "SS":
            return set(raw)
        case "NS":
            return {Decimal(element) for element in raw}
        case "BS":
            return {_raw_bytes(element) for element in raw}
    raise ValueError(f"not a DynamoDB attribute value type: {kind!r}")


def batch_read_units(sizes: Iterable[int], *, consistent: bool) -> float:
    """A BatchGetItem: each item rounded up to 4 KB on its own, then summed (1.5 KB + 6.5 KB costs 4 KB + 8 KB)."""
    return sum(read_units(size, consistent=consistent) for size in sizes)


def _raw_bytes(raw: bytes | bytearray | str) -> bytes:
    """botocore takes a binary value as bytes, or as text it encodes as UTF-8."""
    return raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)

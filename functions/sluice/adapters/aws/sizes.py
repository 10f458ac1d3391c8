"""DynamoDB item sizes, by the rules AWS publishes: what an item is billed and limited by.

The Developer Guide's "DynamoDB item sizes and formats": each attribute's UTF-8 name plus its value.
A string is its UTF-8 bytes; a number 1 byte per two significant digits plus 1; a binary its raw bytes;
a boolean or null 1; a list or map 3 bytes plus 1 per element plus the elements (a map's keys count as
names); a set the sum of its elements. Written once, on plain values (as :mod:`items` types them):
the run's cost estimate sizes each URL item with it, and the meter (``sluice_tools.meter``) each item
it sees on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def item_bytes(item: Mapping[str, Any]) -> int:
    """Bytes DynamoDB counts for an item of plain values: each attribute's name plus its value.

    An ASCII name or string is as many bytes as characters (``str.isascii`` is a flag, not a scan), and a
    string or an int is sized here without a call: the finalizer sizes each of a run's URL items with it."""
    total = 0
    for name, value in item.items():
        total += len(name) if name.isascii() else len(name.encode())
        kind = type(value)
        if kind is str:
            total += len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        elif kind is int:
            total += (len(str(abs(value)).strip("0")) + 1) // 2 + 1
        elif kind is bytes:
            total += len(value)
        elif kind is list:
            total += 3 + len(value) + sum(map(value_bytes, value))
        else:
            total += value_bytes(value)
    return total


def value_bytes(value: Any) -> int:
    """Bytes of one plain value as DynamoDB stores it (:func:`items.serialize`'s types; a set is SS, NS or BS)."""
    kind = type(value)
    if kind is str:
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if kind is int:
        return (len(str(abs(value)).strip("0")) + 1) // 2 + 1
    if value is None or kind is bool:
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, int | float | Decimal):
        return number_bytes(repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, Mapping):
        return 3 + sum(1 + len(str(k).encode()) + value_bytes(v) for k, v in value.items())
    if isinstance(value, set | frozenset):
        return sum(value_bytes(v) for v in value)
    if isinstance(value, list | tuple):
        return 3 + sum(1 + value_bytes(v) for v in value)
    raise TypeError(f"DynamoDB stores no {type(value).__name__}")


def number_bytes(text: str) -> int:
    """``ceil(significant digits / 2) + 1``; leading and trailing zeros are not significant."""
    digits = text if text.isdigit() else "".join(map(str, Decimal(text).as_tuple().digits))
    return (len(digits.strip("0")) + 1) // 2 + 1

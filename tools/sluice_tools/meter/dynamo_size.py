"""DynamoDB item sizes and the request units they cost, by the rules AWS publishes.

Sizes follow the Developer Guide, "DynamoDB item sizes and formats"
(amazondynamodb/latest/developerguide/CapacityUnitCalculations.html); units follow "DynamoDB read
and write operations" (read-write-operations.html) and the on-demand pricing page: a write unit
covers 1 KB, a read unit 4 KB strongly consistent or 8 KB eventually consistent, and a transaction
costs two units per item. The unit arithmetic is the summary's own (``sluice.domain.cost``): one rule
for the estimate and the meter.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from sluice.domain.cost import read_units

Item = Mapping[str, Mapping[str, Any]]
"""An item in DynamoDB's wire format: ``{"pk": {"S": "crawl#books"}, "done": {"N": "3"}}``."""


def item_size(item: Item) -> int:
    """Bytes DynamoDB counts for ``item``: each attribute's UTF-8 name plus its value."""
    return sum(_utf8(name) + value_size(value) for name, value in item.items())


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value, without its name.

    S is its UTF-8 bytes; N is 1 byte per two significant digits plus 1; B is its raw bytes (not
    the base64 on the wire); BOOL and NULL are 1; L and M are 3 bytes plus 1 per element plus the
    elements (a map's keys count as names); SS, NS and BS are the sum of their elements.
    """
    ((kind, raw),) = value.items()
    match kind:
        case "S":
            return _utf8(raw)
        case "N":
            return number_size(raw)
        case "B":
            return len(_raw_bytes(raw))
        case "BOOL" | "NULL":
            return 1
        case "L":
            return 3 + sum(1 + value_size(element) for element in raw)
        case "M":
            return 3 + sum(1 + _utf8(key) + value_size(element) for key, element in raw.items())
        case "SS":
            return sum(_utf8(element) for element in raw)
        case "NS":
            return sum(number_size(element) for element in raw)
        case "BS":
            return sum(len(_raw_bytes(element)) for element in raw)
    raise ValueError(f"not a DynamoDB attribute value type: {kind!r}")


def number_size(text: str) -> int:
    """``ceil(significant digits / 2) + 1``; leading and trailing zeros are not significant."""
    digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0")
    return math.ceil(len(digits) / 2) + 1


def batch_read_units(sizes: Iterable[int], *, consistent: bool) -> float:
    """A BatchGetItem: each item rounded up to 4 KB on its own, then summed (1.5 KB + 6.5 KB costs 4 KB + 8 KB)."""
    return sum(read_units(size, consistent=consistent) for size in sizes)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _raw_bytes(raw: bytes | bytearray | str) -> bytes:
    """botocore takes a binary value as bytes, or as text it encodes as UTF-8."""
    return raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)

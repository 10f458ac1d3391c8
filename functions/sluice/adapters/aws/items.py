"""Plain Python values to DynamoDB's typed attribute values and back (numbers as int or float, never Decimal).

Written here rather than imported from boto3: boto3 pulls in s3transfer at import, a cold start
cost of hundreds of milliseconds for two small functions. botocore is all the functions use.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def serialize(value: Any) -> dict[str, Any]:
    """One value as a DynamoDB attribute value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float | Decimal):
        return {"N": _number(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, Mapping):
        return {"M": {str(k): serialize(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f"cannot store a {type(value).__name__} in DynamoDB")


def _number(value: float | Decimal) -> str:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError("DynamoDB numbers cannot be NaN or infinite")
    return str(Decimal(repr(value)) if isinstance(value, float) else value)


def deserialize(attribute: Mapping[str, Any]) -> Any:
    """One DynamoDB attribute value as a plain value."""
    ((kind, raw),) = attribute.items()
    if kind == "S":
        return raw
    if kind == "N":
        number = Decimal(raw)
        return int(number) if number == number.to_integral_value() else float(number)
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "B":
        return bytes(raw)
    if kind == "M":
        return {k: deserialize(v) for k, v in raw.items()}
    if kind == "L":
        return [deserialize(v) for v in raw]
    if kind in ("SS", "BS"):
        return set(raw)
    if kind == "NS":
        return {deserialize({"N": n}) for n in raw}
    raise TypeError(f"unknown DynamoDB type {kind!r}")


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping of plain values as a DynamoDB item (or expression attribute values)."""
    return {k: serialize(v) for k, v in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain values."""
    return {k: deserialize(v) for k, v in item.items()}

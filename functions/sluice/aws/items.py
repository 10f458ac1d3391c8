"""Plain Python values to DynamoDB's typed attribute values and back (numbers as int or float, never Decimal)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {k: _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    return value


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping of plain values as a DynamoDB item (or expression attribute values)."""
    return {k: _SERIALIZER.serialize(_to_dynamo(v)) for k, v in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain values."""
    return {k: _from_dynamo(_DESERIALIZER.deserialize(v)) for k, v in item.items()}

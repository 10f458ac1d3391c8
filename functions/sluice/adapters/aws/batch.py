"""BatchGetItem with its unprocessed keys retried: the one place DynamoDB batch reads are written."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

BATCH_GET_MAX = 100
_RETRIES = 8


class BatchReadError(RuntimeError):
    """DynamoDB left keys unprocessed after every retry (sustained throttling)."""


def batch_get(db: Any, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool) -> Iterator[dict[str, Any]]:
    """Every item that exists among ``keys`` (DynamoDB-typed), 100 keys per request, unprocessed ones retried."""
    for start in range(0, len(keys), BATCH_GET_MAX):
        request: dict[str, Any] = {
            table: {"Keys": list(keys[start : start + BATCH_GET_MAX]), "ConsistentRead": consistent}
        }
        for attempt in range(_RETRIES):
            answer = db.batch_get_item(RequestItems=request)
            yield from answer["Responses"].get(table, [])
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))  # unprocessed keys mean throttling: back off
        else:
            raise BatchReadError(
                f"{table}: {len(request[table]['Keys'])} keys still unprocessed after {_RETRIES} tries"
            )

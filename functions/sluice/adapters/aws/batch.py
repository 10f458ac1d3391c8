"""DynamoDB batch requests with their unprocessed part retried: the one place that loop is written.

DynamoDB answers a batch request it could not finish under throttling with the part it left
(``UnprocessedKeys``, ``UnprocessedItems``); that part is sent again after a backoff
(:mod:`sluice.domain.backoff`), a bounded number of times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sluice.domain.backoff import Backoff
from sluice.domain.errors import Throttled

BATCH_GET_MAX = 100
TRIES = 8
"""Sends of one request at most (the first and seven retries)."""
UNPROCESSED_BACKOFF = Backoff(0.05, 1.0, floor=0.5)
"""Unprocessed items mean throttling: 50 ms doubling to 1 s, each wait half to all of that (about 3 s in all)."""


class BatchReadError(Throttled):
    """DynamoDB left keys unprocessed after every retry (sustained throttling)."""


class BatchWriteError(Throttled):
    """DynamoDB left items unwritten after every retry (sustained throttling)."""


Request = dict[str, Any]


def until_processed(send: Callable[[Request], Request], request: Request) -> Request:
    """Send ``request`` until nothing is left or the tries run out; what DynamoDB still left (empty: all done).

    ``send`` sends a request and returns its unprocessed part.
    """
    waits = UNPROCESSED_BACKOFF.waits(TRIES)
    while request := send(request):
        wait = next(waits, None)
        if wait is None:
            break
        time.sleep(wait)
    return request


def batch_get(db: Any, table: str, keys: Sequence[dict[str, Any]], *, consistent: bool) -> Iterator[dict[str, Any]]:
    """Every item that exists among ``keys`` (DynamoDB-typed), 100 keys per request, unprocessed ones retried."""
    found: list[dict[str, Any]] = []

    def send(request: Request) -> Request:
        answer = db.batch_get_item(RequestItems=request)
        found.extend(answer["Responses"].get(table, []))
        left: Request = answer.get("UnprocessedKeys") or {}
        return left

    for start in range(0, len(keys), BATCH_GET_MAX):
        request = {table: {"Keys": list(keys[start : start + BATCH_GET_MAX]), "ConsistentRead": consistent}}
        left = until_processed(send, request)
        if left:
            raise BatchReadError(f"{table}: {len(left[table]['Keys'])} keys still unprocessed after {TRIES} tries")
        yield from found
        found.clear()


def batch_write(db: Any, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """One ``BatchWriteItem`` of ``requests`` (25 at most), unprocessed ones retried."""

    def send(request: Request) -> Request:
        left: Request = db.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        return left

    left = until_processed(send, {table: list(requests)})
    if left:
        raise BatchWriteError(f"{table}: {len(left[table])} items still unprocessed after {TRIES} tries")

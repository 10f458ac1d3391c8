"""DynamoDB's unprocessed batch items are sent again after the one backoff, a bounded number of times.

DynamoDB's answers are played by botocore's Stubber on a real client (moto never leaves items
unprocessed); the waits are recorded instead of slept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from sluice.adapters.aws import clients
from sluice.adapters.aws.batch import (
    TRIES,
    UNPROCESSED_BACKOFF,
    BatchReadError,
    BatchWriteError,
    batch_get,
    batch_write,
)

TABLE = "sluice-test-ledger"
KEY = {"pk": {"S": "p"}, "sk": {"S": "s"}}
ITEM = {**KEY, "v": {"N": "1"}}


@pytest.fixture
def dynamo(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber, list[float]]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    slept: list[float] = []
    monkeypatch.setattr("sluice.adapters.aws.batch.time.sleep", slept.append)
    db = clients.client("dynamodb")
    with Stubber(db) as stub:
        yield db, stub, slept
        stub.assert_no_pending_responses()
    clients.reset()


def _left_keys() -> dict[str, Any]:
    return {TABLE: {"Keys": [KEY], "ConsistentRead": True}}


def test_unprocessed_keys_are_read_again_after_a_backoff(dynamo: tuple[Any, Stubber, list[float]]) -> None:
    db, stub, slept = dynamo
    stub.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _left_keys()})
    stub.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _left_keys()})
    stub.add_response("batch_get_item", {"Responses": {TABLE: [ITEM]}})
    assert list(batch_get(db, TABLE, [KEY], consistent=True)) == [ITEM]
    assert len(slept) == 2
    assert all(UNPROCESSED_BACKOFF.ceiling(n) / 2 <= w <= UNPROCESSED_BACKOFF.ceiling(n) for n, w in enumerate(slept))


def test_keys_still_unprocessed_after_every_try_are_an_error(dynamo: tuple[Any, Stubber, list[float]]) -> None:
    db, stub, slept = dynamo
    for _ in range(TRIES):
        stub.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _left_keys()})
    with pytest.raises(BatchReadError, match=f"1 keys still unprocessed after {TRIES} tries"):
        list(batch_get(db, TABLE, [KEY], consistent=True))
    assert len(slept) == TRIES - 1
    assert sum(slept) <= sum(UNPROCESSED_BACKOFF.ceiling(n) for n in range(TRIES - 1))


def test_unwritten_items_are_written_again_and_then_an_error(dynamo: tuple[Any, Stubber, list[float]]) -> None:
    db, stub, slept = dynamo
    put = {"PutRequest": {"Item": ITEM}}
    stub.add_response("batch_write_item", {"UnprocessedItems": {TABLE: [put]}})
    stub.add_response("batch_write_item", {"UnprocessedItems": {}})
    batch_write(db, TABLE, [put])
    assert len(slept) == 1
    for _ in range(TRIES):
        stub.add_response("batch_write_item", {"UnprocessedItems": {TABLE: [put]}})
    with pytest.raises(BatchWriteError, match=f"1 items still unprocessed after {TRIES} tries"):
        batch_write(db, TABLE, [put])
    assert len(slept) == 1 + TRIES - 1

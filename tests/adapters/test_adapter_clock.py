"""Both adapter sets count time by the clock they are built with: a test moves it instead of sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sluice.adapters.aws import clients, keys
from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.hosts import DynamoHostBook
from sluice.adapters.aws.items import from_item, to_item
from sluice.adapters.local.queue import SqliteQueue
from sluice.adapters.local.store import Database
from sluice.domain.clock import FixedClock
from sluice.domain.hosts import HostState
from sluice.domain.pages import url_hash
from sluice.messages import UrlTask

from .conftest import moto_ledger

TABLE = "sluice-test-ledger"
AT = datetime(2030, 1, 1, tzinfo=UTC)
"""Years from the wall clock: an adapter that read the wall clock instead would show."""
TTL_DAYS = 15


@pytest.fixture
def dynamo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_ledger(monkeypatch, TABLE):
        yield


def _expiry(key: dict[str, str]) -> int:
    item = clients.client("dynamodb").get_item(TableName=TABLE, Key=to_item(key), ConsistentRead=True)["Item"]
    return int(from_item(item)["t"])


def test_the_dynamodb_items_expire_counted_from_their_clock(dynamo: None) -> None:
    clock = FixedClock(AT)
    frontier = DynamoFrontier(TABLE, ttl_days=TTL_DAYS, writers=1, clock=clock)
    task = UrlTask(url="https://books.example/a", depth=1, origin="link")
    assert frontier.claim("r1", [task], seeds=0, max_pages=10).won == [task]
    clock.advance(3600)
    DynamoHostBook(TABLE, ttl_days=TTL_DAYS, clock=clock).save([HostState("books.example:443", next_start=1.0)])

    ttl_s = TTL_DAYS * 86400
    assert _expiry(keys.url("r1", url_hash(task.url))) == int(AT.timestamp()) + ttl_s
    assert _expiry(keys.host("books.example:443")) == int(AT.timestamp()) + 3600 + ttl_s


def test_a_local_queue_hides_a_returned_message_until_its_clock_passes_the_delay(tmp_path: Path) -> None:
    clock = FixedClock(AT)
    queue = SqliteQueue(Database(tmp_path), clock=clock)
    queue.send_messages("r1", [("books.example", "body")])
    [message] = queue.receive("r1", 10, 900)
    queue.return_after(message.receipt_handle, 30)

    clock.advance(29)
    assert queue.receive("r1", 10, 900) == []
    assert (queue.depth("r1").visible, queue.depth("r1").in_flight) == (0, 1)
    clock.advance(1)
    [again] = queue.receive("r1", 10, 900)
    assert (again.body, again.receive_count) == ("body", 2)

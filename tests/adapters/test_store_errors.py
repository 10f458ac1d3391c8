"""A store's failure leaves a port as the domain's own error, the same kind from AWS and from the state folder.

Each kind is produced by its situation: on moto where moto can play it (a lock held, a run id taken, a key
that is not there), by botocore's Stubber on a real client where it cannot (throttling, a refusal), and on
a real SQLite file and folder for the local adapters (a database locked by another connection, one opened
read-only). The translated error names the call that failed and why, and keeps the original on its chain.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.hosts import DynamoHostBook
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.adapters.aws.objects import MultipartWriter, S3Objects
from sluice.adapters.aws.queue import SqsQueue
from sluice.adapters.aws.records import DynamoRecords
from sluice.adapters.aws.shardtasks import SqsShardTasks
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.hosts import SqliteHostBook
from sluice.adapters.local.ledger import SqliteRunLedger
from sluice.adapters.local.objects import FileObjects, FileWriter
from sluice.adapters.local.queue import SqliteQueue
from sluice.adapters.local.records import SqliteRecords
from sluice.adapters.local.store import Database
from sluice.domain.errors import Conflict, Denied, Missing, StoreError, Throttled
from sluice.domain.pages import PageResult
from sluice.domain.runs import RunInFlight

from .conftest import moto_ledger

TABLE = "sluice-test-ledger"
BUCKET = "sluice-test-records"
KEY = "work/crawl=c/run=r/parts/p1.jsonl"
OPENED = datetime(2026, 12, 1, 21, 0, 0, tzinfo=UTC)
RESULT = PageResult(url="https://b.example/", depth=0, origin="seed", outcome="failed", status=404)

Ledger = DynamoRunLedger | SqliteRunLedger


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_ledger(monkeypatch, TABLE, bucket=BUCKET):
        yield


@pytest.fixture(params=["moto", "sqlite"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        yield SqliteRunLedger(Database(tmp_path))
        return
    request.getfixturevalue("aws")
    yield DynamoRunLedger(TABLE)


def _stubbed(client: Any, operation: str, code: str, status: int) -> Stubber:
    stub = Stubber(client)
    stub.add_client_error(operation, service_error_code=code, service_message=f"{code} here", http_status_code=status)
    return stub


# -- conflict ---------------------------------------------------------------------------------------------------


def test_a_second_run_while_one_holds_the_lock_is_a_conflict(ledger: Ledger) -> None:
    ledger.open_run("books", "d1", timedelta(hours=12), trigger=None, catalog_run=None, now=OPENED)
    with pytest.raises(Conflict) as refused:
        ledger.open_run("books", "d1", timedelta(hours=12), trigger=None, catalog_run=None, now=OPENED)
    assert isinstance(refused.value, RunInFlight)


def test_a_run_id_taken_before_is_a_conflict(ledger: Ledger) -> None:
    run = ledger.open_run("books", "d1", timedelta(hours=12), trigger=None, catalog_run=None, now=OPENED)
    ledger.finish("books", run.run_id, healthy=True, complete=True, records=0, summary_key="s")
    with pytest.raises(Conflict):
        ledger.open_run(
            "books", "d1", timedelta(hours=12), trigger=None, catalog_run=None, now=OPENED, run_id=run.run_id
        )


def test_a_write_cancelled_by_a_concurrent_transaction_is_a_conflict(aws: None) -> None:
    ledger = DynamoRunLedger(TABLE)
    refused = r"DynamoRunLedger\.set_seeds: AWS refused UpdateItem: TransactionConflict"
    with (
        _stubbed(ledger._db, "update_item", "TransactionConflictException", 400),
        pytest.raises(Conflict, match=refused),
    ):
        ledger.set_seeds("books", "r1", 10)


# -- throttled --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_dynamodb_throttling_that_outlasts_the_retries_is_throttled(aws: None, code: str) -> None:
    frontier = DynamoFrontier(TABLE, ttl_days=15, writers=1)
    with _stubbed(frontier._db, "put_item", code, 400), pytest.raises(Throttled) as throttled:
        frontier.complete("20261201T000000Z-abcdef", [RESULT])
    assert f"DynamoFrontier.complete: AWS refused PutItem: {code}" in str(throttled.value)
    assert isinstance(throttled.value.__cause__, ClientError)


@pytest.mark.parametrize("code", ["SlowDown", "RequestLimitExceeded"])
def test_s3_asking_to_slow_down_is_throttled(aws: None, code: str) -> None:
    objects = S3Objects(BUCKET)
    with _stubbed(objects._s3, "put_object", code, 503), pytest.raises(Throttled, match=f"PutObject: {code}"):
        objects.put(KEY, b"x", "text/plain")


def test_a_state_database_another_process_holds_locked_is_throttled(tmp_path: Path) -> None:
    db = Database(tmp_path)
    with db.reading() as conn:
        conn.execute("PRAGMA busy_timeout = 0")  # the lock is held until after the write: waiting changes nothing
    other = sqlite3.connect(tmp_path / "sluice.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(Throttled, match=r"SqliteFrontier\.complete: OperationalError: database is locked"):
            SqliteFrontier(db).complete("r1", [RESULT])
    finally:
        other.execute("ROLLBACK")
        other.close()


# -- missing ----------------------------------------------------------------------------------------------------


def test_a_range_of_a_key_that_is_not_there_is_missing(aws: None, tmp_path: Path) -> None:
    with pytest.raises(Missing, match=re.escape(f"S3Objects.get_range: s3://{BUCKET}/{KEY} is not there")):
        S3Objects(BUCKET).get_range(KEY, 0, 10)
    with pytest.raises(Missing, match=r"FileObjects\.get_range: FileNotFoundError"):
        FileObjects(tmp_path).get_range(KEY, 0, 10)


def test_a_403_for_a_key_the_listing_does_not_show_is_missing(aws: None) -> None:
    objects = S3Objects(BUCKET)
    with Stubber(objects._s3) as stub:
        stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
        stub.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": BUCKET, "Prefix": KEY, "MaxKeys": 1})
        with pytest.raises(Missing):
            objects.get_range(KEY, 0, 10)


# -- denied -----------------------------------------------------------------------------------------------------


def test_a_403_for_a_key_that_is_there_is_denied(aws: None) -> None:
    objects = S3Objects(BUCKET)
    with Stubber(objects._s3) as stub:
        stub.add_client_error("get_object", service_error_code="AccessDenied", http_status_code=403)
        stub.add_response("list_objects_v2", {"Contents": [{"Key": KEY}], "KeyCount": 1})
        with pytest.raises(Denied, match=r"S3Objects\.get: AWS refused GetObject: AccessDenied"):
            objects.get(KEY)


def test_a_role_without_the_tables_grant_is_denied(aws: None) -> None:
    ledger = DynamoRunLedger(TABLE)
    refused = r"DynamoRunLedger\.get_run: AWS refused GetItem: AccessDeniedException"
    with _stubbed(ledger._db, "get_item", "AccessDeniedException", 400), pytest.raises(Denied, match=refused):
        ledger.get_run("books", "r1")


def test_a_state_database_that_may_not_be_written_is_denied(tmp_path: Path) -> None:
    db = Database(tmp_path)
    with db.reading() as conn:
        conn.execute("PRAGMA query_only = 1")  # as a state file opened read-only answers a write
    with pytest.raises(Denied, match="attempt to write a readonly database"):
        SqliteFrontier(db).complete("r1", [RESULT])


# -- what is not the store's ------------------------------------------------------------------------------------


def test_an_error_that_is_not_the_stores_passes_unchanged(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leaves the state folder"):
        FileObjects(tmp_path).get_range("../outside", 0, 1)


def test_every_kind_is_a_store_error() -> None:
    assert all(issubclass(kind, StoreError) for kind in (Conflict, Throttled, Missing, Denied, RunInFlight))


ADAPTERS = [
    DynamoFrontier,
    DynamoRunLedger,
    DynamoHostBook,
    DynamoRecords,
    S3Objects,
    MultipartWriter,
    SqsQueue,
    SqsShardTasks,
    SqliteFrontier,
    SqliteRunLedger,
    SqliteHostBook,
    SqliteRecords,
    FileObjects,
    FileWriter,
    SqliteQueue,
]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda adapter: adapter.__name__)
def test_every_public_method_of_a_store_adapter_translates_its_errors(adapter: type) -> None:
    """A method added to an adapter without the boundary would let the library's errors reach the steps."""
    public = [name for name, value in vars(adapter).items() if callable(value) and not name.startswith("_")]
    assert public
    assert [name for name in public if not hasattr(getattr(adapter, name), "__wrapped__")] == []

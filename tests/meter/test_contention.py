"""DynamoContention on moto with a fake clock: transaction conflicts as DynamoDB raises them, and hot items."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sluice_tools.meter.aws_meter import AwsMeter
from sluice_tools.meter.calls import observe_calls
from sluice_tools.meter.contention import DynamoContention

Client = Any


@dataclass
class FakeClock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def add_one(item_key: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {
        "TableName": "ledger",
        "Key": item_key,
        "UpdateExpression": "ADD done :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }


RUN = key("crawl#books", "run#1")


def elsewhere(call: Callable[[], Any]) -> Any:
    """Make ``call`` from another thread (another container), as a concurrent caller would; its result."""
    answer: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if failure:
        raise failure[0]
    return answer[0]


def test_a_transaction_overlapping_another_on_one_item_is_canceled_for_conflict(ddb: Client) -> None:
    clock = FakeClock()
    contention = DynamoContention(clock=clock)
    with observe_calls(contention):
        elsewhere(lambda: ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}]))
        clock.advance(0.010)  # still inside the first one's 25 ms
        with pytest.raises(ddb.exceptions.TransactionCanceledException) as caught:
            ddb.transact_write_items(
                TransactItems=[{"Put": {"TableName": "ledger", "Item": key("claims#1", "u")}}, {"Update": add_one(RUN)}]
            )
        clock.advance(0.020)  # the first transaction is over
        ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}])
    assert caught.value.response["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
    ]
    # The canceled transaction changed nothing: its claim was not written, the counter counted twice.
    assert "Item" not in ddb.get_item(TableName="ledger", Key=key("claims#1", "u"))
    assert ddb.get_item(TableName="ledger", Key=RUN)["Item"]["done"] == {"N": "2"}
    assert contention.conflicts() == {"TransactWriteItems": 1}


def test_a_single_write_to_an_item_in_a_transaction_fails_with_transaction_conflict(ddb: Client) -> None:
    clock = FakeClock()
    contention = DynamoContention(clock=clock)
    with observe_calls(contention):
        elsewhere(lambda: ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}]))
        with pytest.raises(ClientError) as caught:
            ddb.update_item(**add_one(RUN))
    assert caught.value.response["Error"]["Code"] == "TransactionConflictException"
    assert contention.conflicts() == {"UpdateItem": 1}


def test_a_callers_next_write_after_its_own_transaction_does_not_conflict(ddb: Client) -> None:
    """It was made after the transaction's answer: on DynamoDB the two cannot overlap."""
    contention = DynamoContention(clock=FakeClock())
    with observe_calls(contention):
        ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}])
        ddb.update_item(**add_one(RUN))
    assert contention.conflicts() == {}
    assert ddb.get_item(TableName="ledger", Key=RUN)["Item"]["done"] == {"N": "2"}


def test_two_plain_updates_of_one_item_never_conflict(ddb: Client) -> None:
    contention = DynamoContention(clock=FakeClock())
    with observe_calls(contention):
        ddb.update_item(**add_one(RUN))
        ddb.update_item(**add_one(RUN))  # same instant, same item
    assert contention.conflicts() == {}
    assert ddb.get_item(TableName="ledger", Key=RUN)["Item"]["done"] == {"N": "2"}


def test_the_meter_counts_the_refused_call_when_placed_first(ddb: Client) -> None:
    meter, contention = AwsMeter(), DynamoContention(clock=FakeClock())
    with observe_calls(meter, contention):
        elsewhere(lambda: ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}]))
        with pytest.raises(ClientError):
            ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}])
    transactions = meter.tally().operations["dynamodb.TransactWriteItems"]
    assert (transactions.requests, transactions.errors) == (2, 1)


def test_fifty_writes_in_half_a_second_on_one_item_is_fifty_per_second(ddb: Client) -> None:
    clock = FakeClock()
    contention = DynamoContention(clock=clock)
    with observe_calls(contention):
        for _ in range(50):
            ddb.update_item(**add_one(RUN))
            clock.advance(0.01)
        # A cooler item: 10 writes a quarter of a second apart (binary fractions, so the clock is exact).
        for _ in range(10):
            ddb.put_item(TableName="ledger", Item=key("claims#1", "cool"))
            clock.advance(0.25)
    rates = contention.rates(top=1)
    assert rates.peak_per_s == 50
    (hottest,) = rates.items
    assert str(hottest) == "item ledger pk=crawl#books sk=run#1: 50 writes/s"
    cool = contention.rates().items[1]
    assert (cool.writes, cool.peak_per_s) == (10, 4)


def test_writes_a_second_apart_do_not_add_up(ddb: Client) -> None:
    clock = FakeClock()
    contention = DynamoContention(clock=clock)
    with observe_calls(contention):
        for _ in range(3):
            ddb.update_item(**add_one(RUN))
            clock.advance(1.0)
    assert contention.rates().peak_per_s == 1


def test_reset_forgets_conflicts_rates_and_holds(ddb: Client) -> None:
    contention = DynamoContention(clock=FakeClock())
    with observe_calls(contention):
        elsewhere(lambda: ddb.transact_write_items(TransactItems=[{"Update": add_one(RUN)}]))
        with pytest.raises(ClientError):
            ddb.update_item(**add_one(RUN))
        contention.reset()
        ddb.update_item(**add_one(RUN))  # the transaction's hold is forgotten too
    assert contention.conflicts() == {}
    assert contention.rates().peak_per_s == 1

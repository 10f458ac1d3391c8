"""AwsMeter on moto: DynamoDB units from item sizes, S3 bytes, SQS billed chunks, a JSON-ready tally."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sluice_tools.meter.aws_meter import AwsMeter
from sluice_tools.meter.calls import observe_calls

Client = Any
SizedItem = Callable[..., dict[str, dict[str, Any]]]
KB = 1024


def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def test_a_put_of_one_and_a_half_kb_costs_two_write_units(ddb: Client, sized_item: SizedItem) -> None:
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.put_item(TableName="ledger", Item=sized_item("claims#run1", "u1", 1536))
    tally = meter.tally()
    assert tally.operations["dynamodb.PutItem"].wru == 2
    assert tally.wru_by_table == {"ledger": 2}
    assert tally.wru_by_partition == {"ledger": {"claims": 2}}


def test_overwriting_costs_the_larger_of_the_item_before_and_after(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 3 * KB))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 100))
    assert meter.tally().wru == 3


def test_a_failed_conditional_put_costs_the_existing_items_size(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 3 * KB))
    meter = AwsMeter()
    with observe_calls(meter), pytest.raises(ClientError, match="ConditionalCheckFailed"):
        ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 100), ConditionExpression="attribute_not_exists(pk)")
    put = meter.tally().operations["dynamodb.PutItem"]
    assert (put.wru, put.errors) == (3, 1)


def test_a_failed_condition_on_a_missing_item_still_costs_one_unit(ddb: Client) -> None:
    meter = AwsMeter()
    with observe_calls(meter), pytest.raises(ClientError):
        ddb.delete_item(TableName="ledger", Key=key("p", "s"), ConditionExpression="attribute_exists(pk)")
    assert meter.tally().wru == 1


def test_an_update_costs_the_item_as_updated(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 500))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.update_item(
            TableName="ledger",
            Key=key("p", "s"),
            UpdateExpression="SET links = :l",
            ExpressionAttributeValues={":l": {"S": "l" * 2000}},
        )
    assert meter.tally().operations["dynamodb.UpdateItem"].wru == 3  # 500 + 2,005 bytes: 3 KB started


def test_a_delete_costs_the_item_it_removes(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 2 * KB))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.delete_item(TableName="ledger", Key=key("p", "s"))
    assert meter.tally().wru == 2


def test_a_transaction_of_three_items_costs_twice_per_item(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("crawl#books", "run#1", 200))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "ledger", "Item": sized_item("claims#1", "a", 1536)}},
                {
                    "Update": {
                        "TableName": "ledger",
                        "Key": key("crawl#books", "run#1"),
                        "UpdateExpression": "ADD enqueued :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": "ledger",
                        "Key": key("active", "books"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    tally = meter.tally()
    assert tally.operations["dynamodb.TransactWriteItems"].wru == 2 * (2 + 1 + 1)
    assert tally.wru_by_partition == {"ledger": {"claims": 4, "crawl": 2, "active": 2}}


def test_a_canceled_transaction_costs_twice_the_existing_items(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("claims#1", "a", 2 * KB))
    meter = AwsMeter()
    with observe_calls(meter), pytest.raises(ClientError, match="TransactionCanceled"):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": "ledger",
                        "Item": key("claims#1", "a"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {"Put": {"TableName": "ledger", "Item": key("claims#1", "b")}},
            ]
        )
    assert meter.tally().wru == 2 * 2 + 2 * 1


def test_a_batch_write_costs_each_item_on_its_own(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "old", 2 * KB))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.batch_write_item(
            RequestItems={
                "ledger": [
                    {"PutRequest": {"Item": sized_item("p", "a", 100)}},
                    {"PutRequest": {"Item": sized_item("p", "b", 1500)}},
                    {"DeleteRequest": {"Key": key("p", "old")}},
                ]
            }
        )
    assert meter.tally().wru == 1 + 2 + 2


def put_ten_items_of_one_kb(ddb: Client, sized_item: SizedItem) -> None:
    for n in range(10):
        ddb.put_item(TableName="ledger", Item=sized_item("claims#run1", f"u{n:02}", KB))


@pytest.mark.parametrize(("consistent", "rru"), [(True, 3.0), (False, 1.5)])
def test_a_query_sums_the_items_it_reads_then_rounds_once(
    ddb: Client, sized_item: SizedItem, consistent: bool, rru: float
) -> None:
    put_ten_items_of_one_kb(ddb, sized_item)
    meter = AwsMeter()
    with observe_calls(meter):
        answer = ddb.query(
            TableName="ledger",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "claims#run1"}},
            ConsistentRead=consistent,
        )
    assert answer["Count"] == 10
    tally = meter.tally()
    assert tally.rru == rru  # 10 KB, rounded up to 12 KB
    assert tally.rru_by_table == {"ledger": rru}
    assert tally.unsized_reads == 0


def test_a_projection_does_not_make_a_read_cheaper(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "s", 5 * KB))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.get_item(TableName="ledger", Key=key("p", "s"), ProjectionExpression="pk", ConsistentRead=True)
        ddb.get_item(TableName="ledger", Key=key("p", "s"))  # eventually consistent by default
        ddb.get_item(TableName="ledger", Key=key("p", "missing"), ConsistentRead=True)
    assert meter.tally().operations["dynamodb.GetItem"].rru == 2 + 1 + 1


def test_a_batch_get_rounds_each_item_up_on_its_own(ddb: Client, sized_item: SizedItem) -> None:
    ddb.put_item(TableName="ledger", Item=sized_item("p", "small", 1536))
    ddb.put_item(TableName="ledger", Item=sized_item("p", "large", 6656))
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.batch_get_item(
            RequestItems={"ledger": {"Keys": [key("p", "small"), key("p", "large")], "ConsistentRead": True}}
        )
    assert meter.tally().rru == 1 + 2


def test_a_filtered_query_is_flagged_as_unsized(ddb: Client, sized_item: SizedItem) -> None:
    put_ten_items_of_one_kb(ddb, sized_item)
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.query(
            TableName="ledger",
            KeyConditionExpression="pk = :p",
            FilterExpression="sk = :s",
            ExpressionAttributeValues={":p": {"S": "claims#run1"}, ":s": {"S": "u00"}},
        )
    assert meter.tally().unsized_reads == 1


def test_writes_from_many_threads_are_all_counted(ddb: Client) -> None:
    meter = AwsMeter()

    def write(worker: int) -> None:
        for n in range(20):
            ddb.put_item(TableName="ledger", Item=key(f"w#{worker}", str(n)))

    with observe_calls(meter):
        threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    put = meter.tally().operations["dynamodb.PutItem"]
    assert (put.requests, put.wru) == (160, 160)


def test_s3_counts_bytes_up_and_down(aws: Callable[[str], Client]) -> None:
    s3 = aws("s3")
    s3.create_bucket(Bucket="pages")
    meter = AwsMeter()
    with observe_calls(meter):
        s3.put_object(Bucket="pages", Key="a.html", Body=b"x" * 3000)
        s3.get_object(Bucket="pages", Key="a.html")["Body"].read()
    s3_ops = meter.tally().of("s3")
    assert s3_ops["PutObject"].bytes_up == 3000
    assert s3_ops["GetObject"].bytes_down == 3000
    assert meter.tally().s3_bytes_up == 3000


def test_an_sqs_message_of_100_kb_is_billed_as_two_requests(aws: Callable[[str], Client]) -> None:
    sqs = aws("sqs")
    url = sqs.create_queue(QueueName="frontier")["QueueUrl"]
    meter = AwsMeter()
    with observe_calls(meter):
        sqs.send_message(QueueUrl=url, MessageBody="x" * 100 * KB)
        sqs.send_message(QueueUrl=url, MessageBody="small")
    send = meter.tally().of("sqs")["SendMessage"]
    assert (send.requests, send.billed_requests) == (2, 3)


def test_the_tally_is_json_ready_and_reset_clears_it(ddb: Client) -> None:
    meter = AwsMeter()
    with observe_calls(meter):
        ddb.put_item(TableName="ledger", Item=key("p", "s"))
    document = json.loads(json.dumps(meter.tally().as_dict()))
    assert document["operations"]["dynamodb.PutItem"]["wru"] == 1
    meter.reset()
    assert meter.tally().operations == {}
    assert meter.tally().wru == 0


def test_lambda_invokes_are_counted() -> None:
    # moto runs Invoke in Docker, so the observer is driven as observe_calls drives it.
    meter = AwsMeter()
    for _ in range(3):
        meter.before("lambda", "Invoke", {"FunctionName": "finalizer", "InvocationType": "Event"})
        meter.after("lambda", "Invoke", {"FunctionName": "finalizer"}, {"StatusCode": 202}, None, 0.001)
    assert meter.tally().lambda_invokes == 3


def test_sqs_counts_the_payload_sent_and_received(aws: Callable[[str], Client]) -> None:
    """What a fetcher's SQS calls carry: with egress: fixed it crosses NAT (docs/costs.md)."""
    sqs = aws("sqs")
    url = sqs.create_queue(QueueName="frontier")["QueueUrl"]
    meter = AwsMeter()
    with observe_calls(meter):
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1500)
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    ops = meter.tally().of("sqs")
    assert (ops["SendMessage"].bytes_up, ops["ReceiveMessage"].bytes_down) == (1500, 1500)
    assert meter.tally().sqs_bytes == 3000

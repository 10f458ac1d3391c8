"""price(): a tally in dollars at the list prices docs/costs.md gives, line by line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sluice_tools.meter.prices import US_EAST_1, price, s3_request_class
from sluice_tools.meter.tally import OperationTally, Tally


def test_a_million_page_run_prices_line_by_line_at_list_prices() -> None:
    # AWS's published list prices (us-east-1, on-demand): DynamoDB $0.625 per million write and $0.125 per
    # million read request units; S3 Standard $0.005 per 1,000 PUT and $0.0004 per 1,000 GET; SQS FIFO $0.50
    # per million; Lambda arm64 $0.0000133334 per GB-s and $0.20 per million requests; Logs $0.50 per GB.
    # Worked by hand: 28 M WRU $17.50 + 3 M RRU $0.375; 1 M S3 PUT $5.00 + 1 M GET $0.40;
    # 20,000 GB-s $0.27 + 10,000 invocations $0.002; 1 M SQS FIFO requests $0.50; 0.55 GB of logs $0.28.
    tally = Tally(
        operations={
            "dynamodb.TransactWriteItems": OperationTally(requests=1, wru=28_000_000, rru=3_000_000),
            "s3.PutObject": OperationTally(requests=1_000_000),
            "s3.GetObject": OperationTally(requests=1_000_000),
            "sqs.SendMessageBatch": OperationTally(requests=1_000_000, billed_requests=1_000_000),
        }
    )
    cost = price(tally, lambda_gb_s=20_000, lambda_invocations=10_000, log_bytes=550 * 1024**2)
    assert cost.dynamodb_writes == pytest.approx(17.50)
    assert cost.dynamodb_reads == pytest.approx(0.375)
    assert cost.s3_put_class == pytest.approx(5.00)
    assert cost.s3_get_class == pytest.approx(0.40)
    assert cost.sqs == pytest.approx(0.50)
    assert cost.lambda_compute == pytest.approx(0.2667, abs=1e-4)
    assert cost.lambda_requests == pytest.approx(0.002)
    assert cost.logs == pytest.approx(0.2686, abs=1e-4)
    assert cost.total == pytest.approx(24.31, abs=0.01)
    assert json.loads(json.dumps(cost.as_dict()))["total"] == cost.total


def test_invokes_the_tally_saw_are_added_to_the_invocations_given() -> None:
    tally = Tally(operations={"lambda.Invoke": OperationTally(requests=500_000)})
    assert price(tally, lambda_invocations=500_000).lambda_requests == pytest.approx(0.20)


@pytest.mark.parametrize(
    ("operation", "price_class"),
    [
        ("PutObject", "put"),
        ("CopyObject", "put"),
        ("CreateMultipartUpload", "put"),
        ("UploadPart", "put"),
        ("CompleteMultipartUpload", "put"),
        ("ListObjectsV2", "put"),
        ("GetObject", "get"),
        ("HeadObject", "get"),
        ("GetBucketLocation", "get"),
        ("SelectObjectContent", "get"),
        ("DeleteObject", "free"),
        ("AbortMultipartUpload", "free"),
    ],
)
def test_s3_operations_fall_in_their_price_class(operation: str, price_class: str) -> None:
    assert s3_request_class(operation) == price_class


def test_another_price_list_prices_the_same_tally_at_its_own_rates() -> None:
    # Prices are data: half the DynamoDB write price halves that line and nothing else.
    tally = Tally(operations={"dynamodb.PutItem": OperationTally(requests=1, wru=2_000_000)})
    cheaper = replace(US_EAST_1, region="elsewhere", dynamodb_per_million_wru=0.3125)
    assert price(tally).dynamodb_writes == pytest.approx(1.25)
    assert price(tally, prices=cheaper).dynamodb_writes == pytest.approx(0.625)
    assert price(tally, prices=cheaper).total == pytest.approx(0.625)

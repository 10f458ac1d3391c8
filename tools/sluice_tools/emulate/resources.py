"""The stack's resources on moto, from the same names and settings the CDK stack reads (infra/config.py)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from botocore.client import BaseClient
from infra.config import StackConfig

from sluice import defaults
from sluice.adapters.aws.clients import client, reset
from sluice.settings import Settings
from sluice_tools.emulate import moto_fifo

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account
LOCAL_VISIBILITY_S = 900
"""As long as a batch can take: a message is redelivered only if its worker died (messages that fail
in a handled way set their own visibility, as in AWS)."""


def fake_credentials() -> None:
    """moto accepts any credentials; these keep boto3 from looking for real ones."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        os.environ[name] = value
    os.environ.pop("AWS_PROFILE", None)
    reset()


def create_resources(config: StackConfig, specs_dir: Path, *, allow_loopback: bool) -> Settings:
    """Queue with its dead-letter queue, both tables, the bucket; return the functions' settings for them."""
    moto_fifo.install()
    sqs, ddb, s3 = client("sqs"), client("dynamodb"), client("s3")
    dlq_url = sqs.create_queue(
        QueueName=config.dlq_name,
        Attributes={"FifoQueue": "true", "MessageRetentionPeriod": str(config.dlq_retention_days * 86400)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=config.queue_name,
        Attributes={
            # As deployed: FIFO, a group per host (infra/queues.py), high-throughput mode.
            "FifoQueue": "true",
            "ContentBasedDeduplication": "false",
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
            "VisibilityTimeout": str(LOCAL_VISIBILITY_S),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": config.max_receive_count}),
        },
    )["QueueUrl"]
    finalize_queue_url = _finalize_queues(sqs, config)
    for table in (config.ledger_table, config.records_table):
        ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    bucket = config.bucket_name(ACCOUNT, REGION)
    s3.create_bucket(Bucket=bucket)
    _workgroups(config, bucket)
    return Settings.model_validate(
        {
            **config.function_settings(),
            "ledger_table": config.ledger_table,
            "records_table": config.records_table,
            "bucket": bucket,
            "queue_url": queue_url,
            "finalize_queue_url": finalize_queue_url,
            "specs_dir": specs_dir,
            # Locally a returned message comes back in seconds, so a demo with faults stays short.
            "visibility_base_s": defaults.LOCAL_VISIBILITY_BASE_S,
            "visibility_max_s": defaults.LOCAL_VISIBILITY_MAX_S,
            "allow_loopback": allow_loopback,
        }
    )


def _workgroups(config: StackConfig, bucket: str) -> None:
    """The stack's two Athena workgroups, as infra/query.py makes them: the users', cut off at
    ``query_scan_limit_gb``, and the Parquet copy's, which the finalizer starts each run's UNLOAD in, cut off at
    ``parquet_scan_limit_gb`` (moto records the queries and keeps the settings; it runs no SQL and cuts nothing)."""
    athena = client("athena")
    for name, cutoff, results in (
        (config.workgroup, config.query_bytes_scanned_cutoff, config.query_results_prefix),
        (config.parquet_workgroup, config.parquet_bytes_scanned_cutoff, config.parquet_results_prefix),
    ):
        athena.create_work_group(
            Name=name,
            Configuration={
                "ResultConfiguration": {
                    "OutputLocation": f"s3://{bucket}/{results}",
                    "EncryptionConfiguration": {"EncryptionOption": "SSE_S3"},
                },
                "EnforceWorkGroupConfiguration": True,
                "BytesScannedCutoffPerQuery": cutoff,
            },
        )


def _finalize_queues(sqs: Any, config: StackConfig) -> str:
    """The finalize shard tasks' standard queue and its dead-letter queue, as infra/queues.py makes them."""
    dead = sqs.create_queue(
        QueueName=config.finalize_dlq_name,
        Attributes={"MessageRetentionPeriod": str(config.dlq_retention_days * 86400)},
    )["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url: str = sqs.create_queue(
        QueueName=config.finalize_queue_name,
        Attributes={
            "VisibilityTimeout": str(config.finalizer.timeout_s * config.visibility_timeout_factor),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": config.max_receive_count}),
        },
    )["QueueUrl"]
    return url


def finalize_dlq_url(config: StackConfig) -> str:
    url: str = client("sqs").get_queue_url(QueueName=config.finalize_dlq_name)["QueueUrl"]
    return url


def dlq_url(config: StackConfig) -> str:
    url: str = client("sqs").get_queue_url(QueueName=config.dlq_name)["QueueUrl"]
    return url


@contextmanager
def serialized_calls() -> Iterator[None]:
    """Make each AWS API call atomic, as the real services are.

    moto's in-memory backends are not thread-safe: two threads adding to the same DynamoDB
    counter in a transaction can lose an increment. The local runner's workers are threads,
    so every call goes through one lock (moto's work is CPU-bound under the GIL anyway).
    """
    original = BaseClient._make_api_call
    lock = threading.RLock()

    def locked(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        with lock:
            return original(self, operation, params)

    BaseClient._make_api_call = locked
    try:
        yield
    finally:
        BaseClient._make_api_call = original

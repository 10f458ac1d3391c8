"""The finalize shard queue's event source mapping, played by hand: receive, invoke the finalizer, delete.

On AWS the mapping polls the queue and invokes the finalizer with up to 10 tasks a batch, at most
``finalizer_shard_max_concurrency`` at once; a task reported failed comes back after its
visibility timeout and goes to the dead-letter queue after ``max_receive_count`` receives. Here a
failed task is made visible again at once (a test does not wait 90 minutes), and its receive count
grows as SQS counts it, so the redrive still happens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.adapters.aws.clients import client
from sluice_tools.emulate.events import sqs_record

MAX_BATCHES = 10_000
"""Invocations one drain makes at most (a phase of 4,096 shards is 410; an attempt about 1,250)."""

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def drain_shards(queue_url: str, invoke: Invoke, batch_size: int = 10) -> list[dict[str, Any]]:
    """Deliver the queue's shard tasks until none is left; what the invocations finalized."""
    sqs = client("sqs")
    finalized: list[dict[str, Any]] = []
    for _ in range(MAX_BATCHES):
        received = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=batch_size, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not received:
            return finalized
        answer = invoke({"Records": [sqs_record(m, queue_url) for m in received]})
        finalized += answer.get("finalized", [])
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        for message in received:
            if message["MessageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            else:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    raise RuntimeError(f"finalize shard queue not drained after {MAX_BATCHES} invocations")

"""The crawl queue and its dead-letter queue: FIFO, a message group per target host; and the finalize
shard tasks' queue and its dead-letter queue (standard: shard tasks have no order and no group).

FIFO for one property, not for order: SQS hands a message group to one consumer at a time, so
one fetcher at a time talks to a host and the spec's per-host limits hold for the fleet
(``sluice.domain.hosts``). High-throughput mode (deduplication and throughput per group) keeps
a broad crawl of many hosts from meeting the queue-wide FIFO limit.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StackConfig


class Queues(Construct):
    """Encrypted, TLS-only queues; a message goes to the dead-letter queue after ``max_receive_count`` receives."""

    def __init__(self, scope: Construct, id: str, *, config: StackConfig) -> None:
        super().__init__(scope, id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=config.dlq_name,
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(config.dlq_retention_days),
        )
        self.frontier = sqs.Queue(
            self,
            "Frontier",
            queue_name=config.queue_name,
            fifo=True,
            content_based_deduplication=False,
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # 6 x the fetcher's timeout: a batch the event source is still retrying must not
            # become visible to a second fetcher (AWS's advice for SQS event sources).
            visibility_timeout=Duration.seconds(config.visibility_timeout_s),
            retention_period=Duration.days(config.queue_retention_days),
            receive_message_wait_time=Duration.seconds(20),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters, max_receive_count=config.max_receive_count),
        )
        self.finalize_dead_letters = sqs.Queue(
            self,
            "FinalizeShardDeadLetters",
            queue_name=config.finalize_dlq_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(config.dlq_retention_days),
        )
        self.finalize_shards = sqs.Queue(
            self,
            "FinalizeShards",
            queue_name=config.finalize_queue_name,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # 6 x the finalizer's timeout, as for the frontier: a task still retried is not given to a second one.
            visibility_timeout=Duration.seconds(config.finalizer.timeout_s * config.visibility_timeout_factor),
            retention_period=Duration.days(config.queue_retention_days),
            receive_message_wait_time=Duration.seconds(20),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.finalize_dead_letters, max_receive_count=config.max_receive_count
            ),
        )

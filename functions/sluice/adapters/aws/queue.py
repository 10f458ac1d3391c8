"""The frontier queue in SQS FIFO: one host's tasks to a message, grouped by host, ten messages to a request.

The queue is FIFO for one property: SQS gives a message group to one consumer at a time, and the
group is the host, so one fetcher at a time talks to a host (``sluice.domain.hosts``). Each
message gets its own deduplication id: a send botocore repeats after a lost answer is taken
once, and a link sent again on purpose (a redelivered page) is a new message.

Messages stay under 64 KB (SQS bills each 64 KB of a request as one request) and requests under
SQS's 256 KB: a million URLs of few hosts at 10 per message are 100,000 messages in 10,000
``SendMessageBatch`` calls (a broad crawl's links spread over many hosts pack fewer to a message).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from threading import Lock
from uuid import uuid4

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors
from sluice.domain.errors import StoreError
from sluice.messages import QueuedMessage, UrlTask, pack

BATCH_ENTRIES = 10
"""SendMessageBatch takes at most 10 entries..."""
BATCH_BYTES = 256 * 1024
"""...and 256 KB in all."""
_RESENDS = 5
_RECEIVES = "ApproximateReceiveCount"


class QueueError(StoreError):
    """Messages SQS would not take after retries; the text names how many and why."""


@dataclass
class SendStats:
    """Messages sent and SQS requests made (requests per 1,000 URLs is the fan-out's cost)."""

    messages: int = 0
    requests: int = 0
    lock: Lock = field(default_factory=Lock, repr=False)

    def add(self, messages: int, requests: int) -> None:
        with self.lock:
            self.messages += messages
            self.requests += requests


Message = tuple[str, str]
"""``(message group, body)``."""


def batches(messages: Iterator[Message]) -> Iterator[list[Message]]:
    """Messages grouped as one SendMessageBatch each: at most 10 and 256 KB."""
    batch: list[Message] = []
    size = 0
    for message in messages:
        body = message[1]
        if batch and (len(batch) >= BATCH_ENTRIES or size + len(body) > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += len(body)
    if batch:
        yield batch


@aws_errors
class SqsQueue:
    """:class:`sluice.ports.WorkQueue` on the crawl queue."""

    def __init__(self, queue_url: str, *, urls_per_message: int = 10, senders: int = 8) -> None:
        self.queue_url = queue_url
        self.urls_per_message = urls_per_message
        self.stats = SendStats()
        self._sqs = client("sqs")
        self._pool = ThreadPoolExecutor(max_workers=senders, thread_name_prefix="queue")
        self._senders = senders

    def send(self, crawl: str, run_id: str, tasks: Sequence[UrlTask]) -> int:
        """Enqueue tasks; return the number of messages sent. Raises QueueError if any could not be sent."""
        groups = batches(pack(crawl, run_id, tasks, self.urls_per_message))
        sent = 0
        while window := [b for _, b in zip(range(self._senders), groups, strict=False)]:
            # Bounded: at most `senders` requests in flight, never the whole run at once.
            sent += sum(self._pool.map(self._send_batch, window))
        return sent

    def _send_batch(self, messages: Sequence[Message]) -> int:
        entries = {
            str(i): {"Id": str(i), "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": uuid4().hex}
            for i, (group, body) in enumerate(messages)
        }
        for _ in range(_RESENDS):
            answer = self._sqs.send_message_batch(QueueUrl=self.queue_url, Entries=list(entries.values()))
            self.stats.add(0, 1)
            failed = answer.get("Failed") or []
            for ok in answer.get("Successful") or []:
                entries.pop(ok["Id"], None)
            if not entries:
                self.stats.add(len(messages), 0)
                return len(messages)
            if any(f.get("SenderFault") for f in failed):
                reasons = "; ".join(f"{f.get('Code')}: {f.get('Message')}" for f in failed)
                raise QueueError(f"SQS refused {len(failed)} message(s): {reasons}")
        raise QueueError(f"SQS did not take {len(entries)} message(s) after {_RESENDS} tries")

    def return_after(self, receipt: str, delay_s: int) -> None:
        self._sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=delay_s)

    def receive_more(self, run_id: str, limit: int) -> list[QueuedMessage]:
        """Up to ``limit`` (at most 10) messages of groups nobody holds: SQS cannot keep to one run, nor need it."""
        answer = self._sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max(1, min(BATCH_ENTRIES, limit)),
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=[_RECEIVES],
        )
        return [
            QueuedMessage(m["MessageId"], m["ReceiptHandle"], m["Body"], int(m["Attributes"][_RECEIVES]))
            for m in answer.get("Messages") or []
        ]

    def delete(self, receipts: Sequence[str]) -> None:
        """Delete done messages, ten to a request; one SQS would not delete comes back after its visibility."""
        for start in range(0, len(receipts), BATCH_ENTRIES):
            chunk = receipts[start : start + BATCH_ENTRIES]
            answer = self._sqs.delete_message_batch(
                QueueUrl=self.queue_url, Entries=[{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)]
            )
            if answer.get("Failed"):
                raise QueueError(f"SQS did not delete {len(answer['Failed'])} message(s): {answer['Failed'][0]}")

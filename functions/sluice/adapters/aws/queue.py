"""The frontier queue in SQS: tasks packed several to a message, up to ten messages to a request, in parallel.

Messages stay under 64 KB (SQS bills each 64 KB of a request as one request) and requests under
SQS's 256 KB: a million URLs at 10 per message are 100,000 messages in 10,000 ``SendMessageBatch``
calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from threading import Lock

from sluice.adapters.aws.clients import client
from sluice.messages import UrlTask, pack

BATCH_ENTRIES = 10
"""SendMessageBatch takes at most 10 entries..."""
BATCH_BYTES = 256 * 1024
"""...and 256 KB in all."""
_RESENDS = 5


class QueueError(Exception):
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


def batches(bodies: Iterator[str]) -> Iterator[list[str]]:
    """Bodies grouped as one SendMessageBatch each: at most 10 and 256 KB."""
    batch: list[str] = []
    size = 0
    for body in bodies:
        if batch and (len(batch) >= BATCH_ENTRIES or size + len(body) > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(body)
        size += len(body)
    if batch:
        yield batch


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

    def _send_batch(self, bodies: Sequence[str]) -> int:
        entries = {str(i): body for i, body in enumerate(bodies)}
        for _ in range(_RESENDS):
            answer = self._sqs.send_message_batch(
                QueueUrl=self.queue_url, Entries=[{"Id": k, "MessageBody": v} for k, v in entries.items()]
            )
            self.stats.add(0, 1)
            failed = answer.get("Failed") or []
            for ok in answer.get("Successful") or []:
                entries.pop(ok["Id"], None)
            if not entries:
                self.stats.add(len(bodies), 0)
                return len(bodies)
            if any(f.get("SenderFault") for f in failed):
                reasons = "; ".join(f"{f.get('Code')}: {f.get('Message')}" for f in failed)
                raise QueueError(f"SQS refused {len(failed)} message(s): {reasons}")
        raise QueueError(f"SQS did not take {len(entries)} message(s) after {_RESENDS} tries")

    def return_after(self, receipt: str, delay_s: int) -> None:
        self._sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=delay_s)

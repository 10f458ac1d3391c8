"""The frontier queue in SQS: URLs packed several to a message, ten messages to a request, requests in parallel.

A million URLs at 10 per message are 100,000 messages and 10,000 ``SendMessageBatch`` calls,
about 10 requests per 1,000 URLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from threading import Lock
from typing import TypeVar

from sluice.aws.clients import client
from sluice.messages import CrawlMessage, UrlTask

_BATCH = 10  # SendMessageBatch takes at most 10 entries
_RESENDS = 5
T = TypeVar("T")


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


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


class FrontierQueue:
    """Sends a run's URL tasks to the crawl queue."""

    def __init__(self, queue_url: str, *, urls_per_message: int = 10, senders: int = 8) -> None:
        self.queue_url = queue_url
        self.urls_per_message = urls_per_message
        self.stats = SendStats()
        self._sqs = client("sqs")
        self._senders = senders

    def messages(self, crawl: str, run_id: str, tasks: Iterable[UrlTask]) -> Iterator[CrawlMessage]:
        for chunk in _chunks(tasks, self.urls_per_message):
            yield CrawlMessage(crawl=crawl, run_id=run_id, tasks=chunk)

    def send(self, crawl: str, run_id: str, tasks: Iterable[UrlTask]) -> int:
        """Enqueue tasks; return the number of messages sent. Raises QueueError if any could not be sent."""
        batches = _chunks(self.messages(crawl, run_id, tasks), _BATCH)
        sent = 0
        with ThreadPoolExecutor(max_workers=self._senders) as pool:
            # Bounded: at most `senders` batches in flight, never the whole run at once.
            window = list(islice(batches, self._senders))
            while window:
                sent += sum(pool.map(self._send_batch, window))
                window = list(islice(batches, self._senders))
        return sent

    def _send_batch(self, batch: Sequence[CrawlMessage]) -> int:
        entries = {str(i): m.model_dump_json(exclude_defaults=False) for i, m in enumerate(batch)}
        for _ in range(_RESENDS):
            answer = self._sqs.send_message_batch(
                QueueUrl=self.queue_url, Entries=[{"Id": k, "MessageBody": v} for k, v in entries.items()]
            )
            self.stats.add(0, 1)
            failed = answer.get("Failed") or []
            for ok in answer.get("Successful") or []:
                entries.pop(ok["Id"], None)
            if not entries:
                self.stats.add(len(batch), 0)
                return len(batch)
            if any(f.get("SenderFault") for f in failed):
                reasons = "; ".join(f"{f.get('Code')}: {f.get('Message')}" for f in failed)
                raise QueueError(f"SQS refused {len(failed)} message(s): {reasons}")
        raise QueueError(f"SQS did not take {len(entries)} message(s) after {_RESENDS} tries")

"""A batch of SQS messages visited concurrently; each message's fate decided on its own.

A malformed body fails only its own message (it reaches the dead-letter queue after the
queue's maximum receives); a transient failure returns its message with a visibility backoff
(exponential, full jitter, at least what a Retry-After asked); everything else is acknowledged.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from sluice.aws.clients import client
from sluice.fetch.client import PageFetcher
from sluice.messages import CrawlMessage, MalformedMessage, parse_body
from sluice.observability import logger
from sluice.pipeline.services import Services
from sluice.pipeline.visit import RetryLater, visit_message


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """The parts of an SQS record a fetcher reads."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> QueuedMessage:
        return cls(
            message_id=record["messageId"],
            receipt_handle=record["receiptHandle"],
            body=record["body"],
            receive_count=int(record.get("attributes", {}).get("ApproximateReceiveCount", 1)),
        )


def visibility_backoff(receive_count: int, retry_after_s: float, rng: random.Random, *, base: float, cap: float) -> int:
    """Seconds until the message is visible again: jittered exponential (half to full), never below Retry-After."""
    ceiling = min(cap, base * 2 ** max(0, receive_count - 1))
    # Rounded up: SQS takes whole seconds, and a fractional Retry-After (an HTTP date) must not be cut short.
    return math.ceil(min(cap, max(retry_after_s, rng.uniform(ceiling / 2, ceiling))))


class Fetchers:
    """One PageFetcher per crawl per container: connection pools and robots.txt caches outlive invocations."""

    def __init__(self, allow_loopback: bool) -> None:
        self._allow_loopback = allow_loopback
        self._by_crawl: dict[str, PageFetcher] = {}

    def for_crawl(self, services: Services, crawl: str) -> PageFetcher:
        if crawl not in self._by_crawl:
            self._by_crawl[crawl] = PageFetcher(services.spec(crawl).politeness, allow_loopback=self._allow_loopback)
        return self._by_crawl[crawl]

    async def aclose(self) -> None:
        for fetcher in self._by_crawl.values():
            await fetcher.aclose()
        self._by_crawl.clear()


async def visit_batch(
    messages: Sequence[QueuedMessage], services: Services, fetchers: Fetchers, rng: random.Random
) -> dict[str, BaseException | None]:
    """Visit every message of a batch at once (a batch is at most the event source's batch size)."""
    results = await asyncio.gather(*(_visit(m, services, fetchers, rng) for m in messages))
    return {m.message_id: r for m, r in zip(messages, results, strict=True)}


async def _visit(
    queued: QueuedMessage, services: Services, fetchers: Fetchers, rng: random.Random
) -> BaseException | None:
    log = {"message_id": queued.message_id, "receive_count": queued.receive_count}
    try:
        message = parse_body(CrawlMessage, queued.body)
        log |= {"crawl": message.crawl, "run_id": message.run_id}
        await visit_message(message, queued.receive_count, services, fetchers.for_crawl(services, message.crawl))
    except MalformedMessage as exc:
        # It can never succeed: make it visible at once so it reaches the dead-letter queue after
        # its maximum receives in seconds, not after that many visibility timeouts.
        logger.error("malformed message", extra={**log, "reason": str(exc)})
        await _return_after(services, queued, 0)
        return exc
    except RetryLater as exc:
        settings = services.settings
        delay = visibility_backoff(
            queued.receive_count, exc.delay_s, rng, base=settings.visibility_base_s, cap=settings.visibility_max_s
        )
        await _return_after(services, queued, delay)
        logger.info("message returned to the queue", extra={**log, "delay_s": delay, "reason": exc.reason})
        return exc
    except Exception as exc:  # not swallowed: reported as this message's failure, retried, then dead-lettered
        logger.exception("message failed", extra=log)
        settings = services.settings
        delay = visibility_backoff(
            queued.receive_count, 0.0, rng, base=settings.visibility_base_s, cap=settings.visibility_max_s
        )
        await _return_after(services, queued, delay)
        return exc
    return None


async def _return_after(services: Services, queued: QueuedMessage, delay_s: int) -> None:
    try:
        await asyncio.to_thread(
            client("sqs").change_message_visibility,
            QueueUrl=services.settings.queue_url,
            ReceiptHandle=queued.receipt_handle,
            VisibilityTimeout=delay_s,
        )
    except ClientError as exc:
        # The message is reported failed all the same; with its receipt handle expired it comes back
        # after its visibility timeout. Raising here would fail the whole batch, done messages included.
        logger.warning(
            "visibility not changed",
            extra={"message_id": queued.message_id, "delay_s": delay_s, "error": exc.response["Error"]["Code"]},
        )

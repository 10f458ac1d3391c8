"""The queue's retry policy: when a message that did not finish comes back, and how a hopeless one leaves.

A message is never deleted while one of its URLs is unfinished: it goes back to the queue with a
visibility that grows with its receives (jittered, never below a site's Retry-After), and after the
queue's maximum receives it reaches the dead-letter queue. Short waits are slept through by the
fetcher itself (:data:`IN_PROCESS_WAIT_CAP_S`); a malformed message is made visible at once, as it
can never succeed.
"""

from __future__ import annotations

import asyncio
import math
import random

from sluice.domain.backoff import Backoff
from sluice.domain.errors import StoreError
from sluice.messages import MalformedMessage, QueuedMessage
from sluice.observability import logger
from sluice.pipeline.services import Services

IN_PROCESS_WAIT_CAP_S = 5.0
"""Longest backoff a fetcher sleeps through; longer waits go back to the queue as visibility."""


class RetryLater(Exception):
    """The message must come back after ``delay_s`` seconds (transient failure, Retry-After)."""

    def __init__(self, delay_s: float, reason: str) -> None:
        super().__init__(f"retry in {delay_s:.0f} s: {reason}")
        self.delay_s = delay_s
        self.reason = reason


def visibility_backoff(receive_count: int, retry_after_s: float, rng: random.Random, *, base: float, cap: float) -> int:
    """Seconds until the message is visible again: jittered exponential (half to full), never below Retry-After."""
    wait = Backoff(base, cap, floor=0.5).delay(receive_count - 1, rng)
    # Rounded up: SQS takes whole seconds, and a fractional Retry-After (an HTTP date) must not be cut short.
    return math.ceil(min(cap, max(retry_after_s, wait)))


async def drop_malformed(services: Services, queued: QueuedMessage, exc: MalformedMessage) -> MalformedMessage:
    """A message that can never succeed, failed: visible again at once, it reaches the dead-letter queue after
    its maximum receives in seconds, not after that many visibility timeouts."""
    logger.error("malformed message", extra={"message_id": queued.message_id, "reason": str(exc)})
    await _change_visibility(services, queued, 0)
    return exc


async def return_later(
    services: Services, rng: random.Random, queued: QueuedMessage, retry_after_s: float, exc: BaseException
) -> BaseException:
    """A message failed with ``exc``, back in the queue after its backoff (:func:`visibility_backoff`)."""
    tuning = services.tuning
    delay = visibility_backoff(
        queued.receive_count, retry_after_s, rng, base=tuning.visibility_base_s, cap=tuning.visibility_max_s
    )
    await _change_visibility(services, queued, delay)
    return exc


async def _change_visibility(services: Services, queued: QueuedMessage, delay_s: int) -> None:
    try:
        await asyncio.to_thread(services.queue.return_after, queued.receipt_handle, delay_s)
    except StoreError as exc:  # reported failed all the same; it comes back after its visibility timeout
        # Raising here would fail the whole batch, done messages included.
        logger.warning(
            "visibility not changed", extra={"message_id": queued.message_id, "delay_s": delay_s, "error": repr(exc)}
        )

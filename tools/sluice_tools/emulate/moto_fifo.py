"""moto's FIFO queues at the speed of its standard ones: the same checks, without re-reading every attribute.

moto 5 checks a FIFO message's group and deduplication id through ``Queue.attributes``, which
counts the queue's messages (a clock read per message) three times per message sent: sending
the 400 messages of a 4,000-seed fan-out took 12 s instead of 1.7 s. These replacements make
the same decisions from the attributes themselves. Installed once, by :func:`install`.
"""

from __future__ import annotations

from typing import Any

from moto.sqs import models
from moto.sqs.exceptions import InvalidParameterValue, MissingParameter

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True

    def validate(
        self: Any,
        queue: Any,
        message_body: str,
        delay_seconds: int,
        deduplication_id: str | None = None,
        group_id: str | None = None,
        validate_group_id: bool = True,
    ) -> None:
        if queue.fifo_queue:
            explicit = not bool(getattr(queue, "content_based_deduplication", False))
            if explicit and not group_id:
                raise MissingParameter("MessageGroupId")
            if explicit and not deduplication_id:
                raise InvalidParameterValue(
                    "The queue should either have ContentBasedDeduplication enabled or "
                    "MessageDeduplicationId provided explicitly"
                )
            if delay_seconds > 0:
                raise InvalidParameterValue(
                    f"Value {delay_seconds} for parameter DelaySeconds is invalid. Reason: "
                    "The request include parameter that is not valid for this queue type."
                )
        if len(message_body) > queue.maximum_message_size:
            raise InvalidParameterValue(
                "One or more parameters are invalid. Reason: Message must be shorter than "
                f"{queue.maximum_message_size} bytes."
            )
        if group_id is None and queue.fifo_queue:
            raise MissingParameter("MessageGroupId")

    def add_message(self: Any, message: Any) -> None:
        if self.fifo_queue and (bool(getattr(self, "content_based_deduplication", False)) or message.deduplication_id):
            window_ms = models.DEDUPLICATION_TIME_IN_SECONDS * 1000
            for m in self._messages:
                if (
                    m.deduplication_id == message.deduplication_id
                    and message.sent_timestamp - m.sent_timestamp < window_ms
                ):
                    return
        with self._messages_lock:
            self._messages.append(message)
            self._messages_lock.notify_all()

    models.SQSBackend._validate_message = validate  # type: ignore[method-assign]
    models.Queue.add_message = add_message  # type: ignore[method-assign]

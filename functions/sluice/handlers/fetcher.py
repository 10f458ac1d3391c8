"""Fetcher Lambda: an SQS batch of URL messages, visited concurrently, answered with partial batch failures.

The batch is visited in one pass on the container's event loop (pages of all messages in flight
together, bounded by the crawl's politeness) and written once per batch; Powertools'
BatchProcessor then reports each message's own result, so one bad message never fails the others.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice.collector import collect_rarely_from_now
from sluice.handlers.bootstrap import services
from sluice.messages import QueuedMessage
from sluice.observability import logger, traced_handler
from sluice.pipeline.visit.batch import visit_batch
from sluice.pipeline.visit.container import Container

collect_rarely_from_now()  # the one deliberate import-time action: after the imports (sluice.collector)

_containers = threading.local()


def _container() -> tuple[asyncio.AbstractEventLoop, Container]:
    """The event loop and fetchers live as long as the container, so pools and robots caches are reused.

    One per thread: a Lambda container runs one invocation at a time, and the emulated runner's
    workers are threads standing in for containers.
    """
    if not hasattr(_containers, "state"):
        _containers.state = (asyncio.new_event_loop(), Container(services().tuning.allow_loopback))
    state: tuple[asyncio.AbstractEventLoop, Container] = _containers.state
    return state


@logger.inject_lambda_context(clear_state=True)
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    loop, container = _container()
    messages = [QueuedMessage.from_record(r) for r in event.get("Records", [])]
    time_left = lambda: context.get_remaining_time_in_millis() / 1000  # noqa: E731
    results = loop.run_until_complete(visit_batch(messages, services(), container, time_left=time_left))

    def report(record: SQSRecord) -> None:
        error = results.get(record.message_id)
        if error is not None:
            raise error

    # A processor per invocation: it holds the batch's results, and the emulated runner's worker
    # threads (standing in for containers) invoke this handler concurrently.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(event=event, record_handler=report, processor=processor, context=context)
    return dict(response)


def close_container() -> None:
    """Close this thread's fetchers and event loop (the emulated runner's workers, when a run ends)."""
    state = getattr(_containers, "state", None)
    if state is None:
        return
    loop, container = state
    loop.run_until_complete(container.aclose())
    loop.close()
    del _containers.state

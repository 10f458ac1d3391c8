"""A batch that is done fetching lets its host go before it writes (the local runner's ``let_go``): the host's
next batch is fetched while the first one's writes go on, and neither a page nor a record counts twice, even
when the first batch dies between its fetching and its write.

The local adapter set only: SQS FIFO keeps a group until its messages are deleted, so the stack has no such step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from sluice.messages import QueuedMessage
from sluice.pipeline.container import Container
from sluice.pipeline.visit import Results, visit_batch
from sluice_tools.demosite import RunningDemoSite

from .test_exactly_once import BOOKS, CRAWL, PAGES, assert_each_page_and_record_once, fail_first, listing

WAIT_S = 10.0
RECEIVE_TRIES = 200


def _in_thread(pipeline: Any, batch: list[QueuedMessage]) -> Future[Results]:
    """``batch`` visited on a loop of its own, letting its host go as the local runner does."""
    answer: Future[Results] = Future()

    def visit() -> None:
        async def run() -> Results:
            container = Container(allow_loopback=True)
            try:
                return await visit_batch(
                    batch, pipeline.services, container, let_go=pipeline.store.queue.release_groups
                )
            finally:
                await container.aclose()

        try:
            answer.set_result(asyncio.run(run()))
        except BaseException as exc:  # the test thread reads it from the future
            answer.set_exception(exc)

    threading.Thread(target=visit, daemon=True).start()
    return answer


def _receive_once_let_go(pipeline: Any, before: Callable[[], bool]) -> list[QueuedMessage]:
    """The host's next messages, received as soon as the batch holding them lets its host go (bounded)."""
    for _ in range(RECEIVE_TRIES):
        received = pipeline.store.queue.receive(None, 10, 900)
        if received:
            return list(received)
        assert before(), "the first batch ended before it let its host go"
        threading.Event().wait(WAIT_S / RECEIVE_TRIES)
    raise AssertionError("the host was not let go while its batch wrote")


def _start(pipeline: Any, site: RunningDemoSite, books_spec: Any) -> str:
    pipeline.configure(urls_per_message=1)
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id: str = pipeline.start(CRAWL)
    return run_id


def test_the_next_batch_of_a_host_is_fetched_while_the_first_writes(
    local_pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = local_pipeline
    run_id = _start(pipeline, site, books_spec)
    frontier, queue = pipeline.services.frontier, pipeline.store.queue
    second_fetched, real_complete = threading.Event(), frontier.complete

    def complete(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread() and not second_fetched.is_set():
            assert second_fetched.wait(WAIT_S), "the first batch's write waited for nothing"
        return real_complete(*args, **kwargs)

    monkeypatch.setattr(frontier, "complete", complete)
    first = queue.receive(None, 2, 900)
    assert queue.receive(None, 10, 900) == []  # one host: its group is held while the first batch fetches
    writing = _in_thread(pipeline, first)
    second = _receive_once_let_go(pipeline, lambda: not writing.done())
    assert queue.depth(None).in_flight == PAGES  # the first batch's two messages are still in flight
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [1, 1, 0, 0, 0]
    second_fetched.set()  # lets the first batch's write go on: the second one is visited meanwhile
    results = pipeline._loop()[0].run_until_complete(
        visit_batch(second, pipeline.services, pipeline._loop()[1], let_go=queue.release_groups)
    )
    assert set(results.values()) == {None}
    assert set(writing.result(WAIT_S).values()) == {None}
    queue.delete([m.receipt_handle for m in [*first, *second]])
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [1] * PAGES


def test_a_batch_that_dies_after_letting_its_host_go_loses_and_doubles_nothing(
    local_pipeline: Any, site: RunningDemoSite, books_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = local_pipeline
    run_id = _start(pipeline, site, books_spec)
    frontier, queue = pipeline.services.frontier, pipeline.store.queue
    second_received = threading.Event()
    dies = fail_first(1, frontier.complete)

    def complete(*args: Any, **kwargs: Any) -> Any:
        assert second_received.wait(WAIT_S)  # the first batch dies writing, once the host's next batch has it
        return dies(*args, **kwargs)

    monkeypatch.setattr(frontier, "complete", complete)
    first = queue.receive(None, 2, 900)
    dying = _in_thread(pipeline, first)
    second = _receive_once_let_go(pipeline, lambda: not dying.done())
    second_received.set()
    assert set(dying.result(WAIT_S).values()) != {None}  # failed: its messages are not deleted
    assert pipeline.tally(CRAWL, run_id).done == 0
    loop, container = pipeline._loop()
    assert set(loop.run_until_complete(visit_batch(second, pipeline.services, container)).values()) == {None}
    queue.delete([m.receipt_handle for m in second])
    for message in first:  # the dead batch's messages come back (their visibility ran out)
        queue.return_after(message.receipt_handle, 0)
    assert pipeline.drain() == 1
    pipeline.finalize()

    assert_each_page_and_record_once(pipeline, run_id)
    assert pipeline.tally(CRAWL, run_id).records == BOOKS
    # The dead batch's two pages were fetched again (nothing of theirs was counted), the others once.
    assert [site.stats.count(listing(n)) for n in range(1, PAGES + 1)] == [2, 2, 1, 1, 1]

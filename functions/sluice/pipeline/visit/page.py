"""One URL of a batch, visited: the checks before it is asked, the (conditional) fetch, and its result.

A URL is asked "changed since?" when the catalog run knew its validators and a 304 can stand for its
records, and not asked at all when a sitemap's lastmod or the recrawl schedule says it is not due;
its result follows the rules of :mod:`sluice.pipeline.visit.page_results`. What the batch does with the
visits (write them, return the retries to the queue) is :mod:`sluice.pipeline.visit.batch`'s.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sluice.domain.errors import StoreError
from sluice.domain.pages import BY_SCHEDULE, Prior
from sluice.domain.secrets import SecretUnavailable
from sluice.extraction.urls import Scope
from sluice.fetch.client import PageFetcher
from sluice.fetch.outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
from sluice.fetch.proxies import with_route
from sluice.messages import QueuedMessage, UrlTask
from sluice.observability import logger
from sluice.pipeline.visit.page_results import (
    Retry,
    Visit,
    failed_result,
    fetched_visit,
    not_due_yet,
    page_changed,
    page_type,
    reused_result,
    skipped_result,
)
from sluice.pipeline.visit.requeue import IN_PROCESS_WAIT_CAP_S
from sluice.ports import ObjectStore
from sluice.spec import CrawlSpec

if TYPE_CHECKING:
    from sluice.pipeline.visit.archive import BatchArchive

TIME_MARGIN_S = 20.0
"""A URL not started when the invocation has this little time left goes back to the queue."""
OUT_OF_TIME = "invocation time running out"


@dataclass
class PageVisitor:
    """How a batch visits each of its URLs: within the crawl's concurrency, scope and the invocation's time."""

    spec: CrawlSpec
    fetcher: PageFetcher | SecretUnavailable
    """The crawl's fetcher, or why it could not be made (then every page fails with the reason)."""
    scope: Scope
    slots: asyncio.Semaphore
    """The crawl's concurrency: URLs visited at once."""
    max_receives: int
    """The queue's maximum receives: a message received this often is on its last try."""
    time_left: Callable[[], float]
    clock: Callable[[], float]
    """Epoch seconds now (``Services.clock``): what a page's fetch time and the recrawl schedule read."""
    archive: BatchArchive | None
    objects: ObjectStore
    log: dict[str, str]

    async def visit(self, task: UrlTask, queued: QueuedMessage) -> Visit | Retry:
        """The URL's visit; a :class:`Retry` when it must come back (a retryable failure, or no time left)."""
        async with self.slots:
            # Every visit ends before the invocation must write its batch: a URL still waiting (on a
            # slow site, a host's delay, a retry) when the budget runs out goes back to the queue.
            budget = self.time_left() - TIME_MARGIN_S
            if budget <= 0:
                return Retry(task, Failed(task.url, OUT_OF_TIME, True))
            out_of_scope = self.scope.reason(task.url)
            if out_of_scope is not None:
                return Visit(task, skipped_result(task, f"out of the crawl's scope: {out_of_scope}"))
            started = time.monotonic()
            last_try = queued.receive_count >= self.max_receives
            fetcher = self.fetcher
            if isinstance(fetcher, SecretUnavailable):  # every page fails with the reason (retried if it may pass)
                failure = Failed(task.url, str(fetcher), fetcher.retryable)
                if fetcher.retryable and not last_try:
                    return Retry(task, failure)
                return Visit(task, failed_result(task, failure, task.prior.prior() if task.prior else None))
            try:
                visit = await asyncio.wait_for(
                    visit_page(self.spec, fetcher, task, last_try=last_try, clock=self.clock, archive=self.archive),
                    None if math.isinf(budget) else budget,
                )
            except TimeoutError:
                return Retry(task, Failed(task.url, OUT_OF_TIME, True))
            if isinstance(visit, Visit):
                self._annotate(visit, fetcher, round((time.monotonic() - started) * 1000))
            await self._flush_full_archive()
            return visit

    def _annotate(self, visit: Visit, fetcher: PageFetcher, ms: int) -> None:
        """The visit's result with what the batch knows of it: its time, type, rule, carried data and route."""
        task = visit.task
        visit.result = visit.result.but(
            ms=ms,
            type=page_type(self.spec, visit),
            via=task.via,
            carry=task.carry,
            parent=task.parent if task.carry else None,
        )
        visit.result = with_route(visit.result, fetcher.route(task.url))
        for proxy, why, ejected in visit.result.proxy_failures:
            if ejected:  # by its spec name and our words: never its address or credentials
                logger.warning("proxy ejected", extra={**self.log, "proxy": proxy, "reason": why})

    async def _flush_full_archive(self) -> None:
        """A batch of large bodies writes more than one archive file: the full one goes now."""
        if self.archive is None or not self.archive.full:
            return
        try:
            await asyncio.to_thread(self.archive.flush, self.objects)
        except StoreError as exc:  # remembered: the batch's own flush raises it before anything counts
            logger.warning("archive file not written", extra={**self.log, "error": repr(exc)})


async def visit_page(
    spec: CrawlSpec,
    fetcher: PageFetcher,
    task: UrlTask,
    *,
    last_try: bool,
    clock: Callable[[], float],
    archive: BatchArchive | None = None,
) -> Visit | Retry:
    """One URL asked (or not, when it is not due) and its result made; a :class:`Retry` for a retryable failure
    that is not on its last try."""
    prior = task.prior.prior() if task.prior is not None else None
    if prior is not None and prior.not_due(task.lastmod):
        # A sitemap says the page has not changed since its last fetch: not asked at all, reused as a 304 is.
        return Visit(task, reused_result(task, prior, Validators(prior.etag, prior.last_modified), None, due=False))
    schedule = spec.recrawl.schedule() if spec.recrawl is not None else None
    if schedule is not None and prior is not None and not_due_yet(schedule, task, prior, int(clock())):
        # Its recrawl interval has not run out: not asked, reused as a page a sitemap says is unchanged.
        known = Validators(prior.etag, prior.last_modified)
        return Visit(task, reused_result(task, prior, known, None, due=False, why=BY_SCHEDULE))
    # Ask "changed since?" only when a 304 can stand for the records (they are in the catalog run's output).
    conditional = prior is not None and prior.reusable and bool(prior.etag or prior.last_modified)
    validators = Validators(prior.etag, prior.last_modified) if conditional and prior is not None else None
    outcome: FetchOutcome = await fetcher.fetch(task.url, validators, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
    if isinstance(outcome, NotModified) and (prior is None or not prior.reusable):
        outcome = await fetcher.fetch(task.url, None, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
    now = int(clock())
    match outcome:
        case Failed() if outcome.retryable and not last_try:
            return Retry(task, outcome)
        case Failed():
            return Visit(task, failed_result(task, outcome, prior))
        case Skipped():
            return Visit(task, skipped_result(task, outcome.reason))
        case NotModified():
            kept_validators = outcome.validators.or_else(validators)
            visit = Visit(task, reused_result(task, prior or Prior(), kept_validators, None, now=now))
        case Fetched():
            visit = fetched_visit(spec, task, prior, outcome, now)
            if archive is not None:
                # Compressed here, as the page is extracted here: on the loop it measured faster than in a
                # thread (bench/archive.py), and only the compressed record stays.
                ref = archive.add(task, outcome)
                if visit.result.holds_records:
                    visit.result = replace(visit.result, archive=ref)
    if schedule is not None and visit.result.outcome in ("fetched", "not_modified"):
        kept = prior.interval if prior is not None else None
        interval = schedule.next_interval(kept, changed=page_changed(visit.result, prior))
        visit.result = replace(visit.result, interval=interval)
    return visit

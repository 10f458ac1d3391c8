"""Visit a message's URLs: fetch, extract, write records, enqueue new links, count each URL once.

Every step is safe to repeat. A URL already counted for its run is skipped; records are written
by content hash and page objects by URL hash; links are claimed before they are sent, and a
redelivered page sends again the links it claimed but may not have sent. Only the final ledger
transaction counts a URL, and it counts it once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from sluice.aws.catalog import PageState
from sluice.aws.ledger import PageCounts, RunClosed
from sluice.extraction.charset import parser_input
from sluice.extraction.extract import extract_page
from sluice.fetch.client import PageFetcher
from sluice.fetch.outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped
from sluice.messages import CrawlMessage, MalformedMessage, UrlTask
from sluice.observability import logger
from sluice.pipeline.services import Services
from sluice.spec import CrawlSpec

IN_PROCESS_WAIT_CAP_S = 5.0
"""Longest backoff a fetcher sleeps through; longer waits go back to the queue as visibility."""


class RetryLater(Exception):
    """The message must come back after ``delay_s`` seconds (transient failure, Retry-After)."""

    def __init__(self, delay_s: float, reason: str) -> None:
        super().__init__(f"retry in {delay_s:.0f} s: {reason}")
        self.delay_s = delay_s
        self.reason = reason


@dataclass(frozen=True, slots=True)
class VisitReport:
    """What one message did."""

    counted: int
    skipped_done: int
    run_open: bool


async def visit_message(
    message: CrawlMessage, receive_count: int, services: Services, fetcher: PageFetcher
) -> VisitReport:
    """Process every URL of ``message``; raise RetryLater if some must be tried again later."""
    run = await asyncio.to_thread(services.ledger.get_run, message.crawl, message.run_id)
    if run is None:
        raise MalformedMessage(f"run {message.run_id} of crawl {message.crawl!r} does not exist")
    if run.status != "running":
        logger.warning("message for a closed run dropped", extra={"crawl": message.crawl, "run_id": message.run_id})
        return VisitReport(0, len(message.tasks), run_open=False)
    spec = services.spec(message.crawl)
    claims = await asyncio.to_thread(services.ledger.claims, message.run_id, [t.url for t in message.tasks])
    unclaimed = [t.url for t in message.tasks if t.url not in claims]
    if unclaimed:
        raise MalformedMessage(f"URL(s) never claimed for run {message.run_id}: {', '.join(unclaimed[:3])}")
    todo = [t for t in message.tasks if claims[t.url].get("status") != "done"]
    pages = await asyncio.to_thread(services.catalog.pages, spec.name, [t.url for t in todo])
    last_try = receive_count >= services.settings.max_receive_count
    visit = _Visit(spec, message.run_id, services, receive_count)
    # Every URL runs to its end before the message's fate is decided: one URL's crash must not leave
    # the others in flight on an event loop that stops (and is frozen) when the handler returns.
    results = await asyncio.gather(
        *(visit.one(task, pages.get(task.url), fetcher, last_try) for task in todo), return_exceptions=True
    )
    counted = sum(1 for r in results if r is True)
    retries = [r for r in results if isinstance(r, Failed)]
    if counted:
        await asyncio.to_thread(_finalize_if_done, services, spec.name, message.run_id)
    crashed = [r for r in results if isinstance(r, BaseException)]
    if crashed:
        raise crashed[0]
    if retries:
        delay = max((r.retry_after_s or 0.0) for r in retries)
        raise RetryLater(delay, "; ".join(sorted({f"{r.url}: {r.reason}" for r in retries})))
    return VisitReport(counted, len(message.tasks) - len(todo), run_open=True)


def _finalize_if_done(services: Services, crawl: str, run_id: str) -> None:
    run = services.ledger.get_run(crawl, run_id)
    if run is not None and run.status == "running" and run.drained:
        logger.info("run has nothing pending", extra={"crawl": crawl, "run_id": run_id})
        services.finalize_later({"crawl": crawl, "run_id": run_id})


class _Visit:
    """The URLs of one message: shared context for :meth:`one`."""

    def __init__(self, spec: CrawlSpec, run_id: str, services: Services, receive_count: int) -> None:
        self.spec, self.run_id, self.services, self.receive_count = spec, run_id, services, receive_count

    async def one(self, task: UrlTask, page: PageState | None, fetcher: PageFetcher, last_try: bool) -> bool | Failed:
        """True if this call counted the URL, False if it was already counted, Failed if it must be retried."""
        log = {"crawl": self.spec.name, "run_id": self.run_id, "url": task.url}
        # Validators written by this very run mean an earlier attempt died before counting the page:
        # fetch it whole, so its records are classified as that attempt classified them.
        validators = page.validators if page is not None and page.run_id != self.run_id else None
        outcome = await fetcher.fetch(task.url, validators, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
        carried: str | None = None
        if isinstance(outcome, NotModified) and page is not None:
            carried = await asyncio.to_thread(self._carry, task, page)
            if carried is None:
                # The stored records are gone (expired by the bucket's lifecycle): a 304 cannot bring
                # them back, so fetch the page whole rather than lose its records.
                logger.info("stored records gone: fetching the page whole", extra=log)
                outcome = await fetcher.fetch(task.url, None, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
        if isinstance(outcome, Failed) and outcome.retryable and not last_try:
            logger.info("page will be retried", extra={**log, "reason": outcome.reason})
            return outcome
        try:
            return await asyncio.to_thread(self._record, task, page, outcome, carried)
        except RunClosed:
            logger.warning("page finished after its run was finalized", extra=log)
            return False

    def _record(self, task: UrlTask, page: PageState | None, outcome: FetchOutcome, carried: str | None) -> bool:
        log = {"crawl": self.spec.name, "run_id": self.run_id, "url": task.url}
        match outcome:
            case Fetched():
                counts = self._fetched(task, outcome)
            case NotModified():
                counts = self._not_modified(task, page, outcome, carried)
            case Failed():
                logger.warning("page failed", extra={**log, "reason": outcome.reason, "status": outcome.status})
                counts = PageCounts("failed", reason=outcome.reason)
            case Skipped():
                logger.info("page skipped", extra={**log, "reason": outcome.reason})
                counts = PageCounts("skipped", reason=outcome.reason)
        counted = self.services.ledger.complete(self.spec.name, self.run_id, task.url, counts)
        if counted:
            logger.info("page done", extra={**log, "outcome": counts.outcome, "records_new": counts.records_new})
        return counted

    def _fetched(self, task: UrlTask, outcome: Fetched) -> PageCounts:
        services, crawl = self.services, self.spec.name
        html = parser_input(outcome.body, outcome.content_type)
        extraction = extract_page(self.spec, outcome.final_url, html)
        key = services.objects.put_page(crawl, self.run_id, task.url, extraction.records)
        tally = services.catalog.write_records(crawl, self.run_id, task.url, extraction.records)
        links = tuple(extraction.links)
        state = PageState(
            task.url, outcome.validators, outcome.content_hash, len(extraction.records), key, self.run_id, links
        )
        services.catalog.put_page(crawl, state)
        self._enqueue(task, links)
        return PageCounts(
            "fetched",
            records_new=tally.new,
            records_changed=tally.changed,
            records_unchanged=tally.unchanged,
            items=extraction.items,
            missing=dict(extraction.missing),
            rejected=dict(extraction.rejected),
        )

    def _carry(self, task: UrlTask, page: PageState) -> str | None:
        """Copy the page's records from the run that fetched them into this run; None if they are gone."""
        if page.object_key is None:
            return None
        return self.services.objects.carry_page(page.object_key, self.spec.name, self.run_id, task.url)

    def _not_modified(
        self, task: UrlTask, page: PageState | None, outcome: NotModified, carried: str | None
    ) -> PageCounts:
        """A 304: the page's records from the run that fetched it are this run's too, carried without a fetch."""
        if page is None or carried is None:
            return PageCounts("not_modified")
        state = PageState(
            task.url, outcome.validators, page.content_hash, page.records, carried, self.run_id, page.links
        )
        self.services.catalog.put_page(self.spec.name, state)
        self._enqueue(task, page.links)
        return PageCounts("not_modified", records_unchanged=page.records)

    def _enqueue(self, parent: UrlTask, links: Sequence[str]) -> None:
        if parent.depth >= self.spec.follow.max_depth or not links:
            return
        services, crawl = self.services, self.spec.name
        children = [UrlTask(url=link, depth=parent.depth + 1, parent=parent.url) for link in links]
        claimed = services.ledger.claim(crawl, self.run_id, children, max_pages=self.spec.follow.max_pages)
        if self.receive_count > 1:
            # A redelivered page may have claimed links and died before sending them: send those again.
            fresh = {t.url for t in claimed}
            earlier = services.ledger.claims(self.run_id, [t.url for t in children if t.url not in fresh])
            claimed += [
                t
                for t in children
                if earlier.get(t.url, {}).get("parent") == parent.url and earlier[t.url].get("status") == "queued"
            ]
        if claimed:
            services.queue.send(crawl, self.run_id, claimed)

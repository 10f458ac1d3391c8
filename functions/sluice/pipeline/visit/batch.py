"""Visit a batch of queue messages: fetch every URL, and write what the batch learned in one or two chunks.

The batch's steps, in order: pack more messages when its hosts cannot use the crawl's concurrency,
group them by run, refill the hosts' next waves of seeds, leave out URLs a redelivery already counted,
take up each host where the fleet left it, visit every URL (:mod:`sluice.pipeline.visit.page`, by the
rules of :mod:`sluice.pipeline.visit.page_results`), write the visits (:mod:`sluice.pipeline.visit.writer`: one or
two chunks, in an order that makes a crash at any line harmless), hand the hosts on, and answer per
message: done, or back to the queue (:mod:`sluice.pipeline.visit.requeue`). What outlives the invocation
(fetchers, secrets, seed sets) is the :class:`~sluice.pipeline.visit.container.Container`'s.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from sluice.domain.errors import StoreError
from sluice.domain.hosts import MAX_PAUSE_S, HostState, host_key
from sluice.domain.pages import UrlEntry, url_hash
from sluice.domain.runs import Progress, RunState
from sluice.domain.secrets import SecretUnavailable
from sluice.extraction.urls import Scope
from sluice.fetch.client import PageFetcher
from sluice.messages import CrawlMessage, MalformedMessage, QueuedMessage, UrlTask, parse_body
from sluice.observability import annotate, logger, traced
from sluice.pipeline.robots import SharedRobots
from sluice.pipeline.services import Services, UnknownCrawl
from sluice.pipeline.start.backlog import send_backlog
from sluice.pipeline.visit.carried import mark_stale, refresh
from sluice.pipeline.visit.container import Container
from sluice.pipeline.visit.links import parent_id
from sluice.pipeline.visit.page import TIME_MARGIN_S, PageVisitor
from sluice.pipeline.visit.page_results import Retry, Visit, awaits_parent
from sluice.pipeline.visit.requeue import RetryLater, drop_malformed, return_later
from sluice.pipeline.visit.writer import ChunkedWrites, ChunkWriter, early_chunk
from sluice.spec import CrawlSpec, SpecError

if TYPE_CHECKING:
    from sluice.pipeline.visit.archive import BatchArchive

BatchUrl = tuple[str, QueuedMessage, UrlTask]
"""A URL of a batch to visit: its hash, the message that holds it, its task."""
Results = dict[str, BaseException | None]
"""Per message id: None (done) or the exception that fails it."""
Parsed = list[tuple[QueuedMessage, CrawlMessage | MalformedMessage]]

PACK_MIN_TIME_S = 2 * TIME_MARGIN_S
"""A batch is packed with more messages only while the invocation has this much time left."""


async def visit_batch(
    messages: Sequence[QueuedMessage],
    services: Services,
    container: Container,
    *,
    time_left: Callable[[], float] = lambda: math.inf,
) -> Results:
    """Visit every message of a batch; per message id, None (done) or the exception that fails it.

    A batch of few hosts is packed first (:func:`_pack`): messages it receives itself are visited
    with the batch, deleted here when done, and left out of the results (the caller answers only
    for its own)."""
    own = [(queued, _parse(queued)) for queued in messages]
    with traced("pack"):
        extra = await _pack(own, services, time_left)
    results: Results = {}
    runs: dict[tuple[str, str], list[tuple[QueuedMessage, CrawlMessage]]] = {}
    for queued, message in [*own, *extra]:
        if isinstance(message, MalformedMessage):
            results[queued.message_id] = await drop_malformed(services, queued, message)
            continue
        runs.setdefault((message.crawl, message.run_id), []).append((queued, message))
    for (crawl, run_id), group in runs.items():
        try:
            results |= await _RunBatch(services, container, crawl, run_id, group, time_left).visit()
        except MalformedMessage as exc:
            for queued, _ in group:
                results[queued.message_id] = await drop_malformed(services, queued, exc)
        except Exception as exc:  # the group's boundary: whatever failed, its messages are retried, then dead-lettered
            logger.exception("batch failed", extra={"crawl": crawl, "run_id": run_id})
            for queued, _ in group:
                results[queued.message_id] = await return_later(services, container.rng, queued, 0.0, exc)
    if extra:
        done = [queued.receipt_handle for queued, _ in extra if results.pop(queued.message_id, None) is None]
        try:
            await asyncio.to_thread(services.queue.delete, done)
        except StoreError as exc:  # counted already: they come back after their visibility and are found done
            logger.warning("packed messages not deleted", extra={"messages": len(done), "error": repr(exc)})
    return results


def _parse(queued: QueuedMessage) -> CrawlMessage | MalformedMessage:
    try:
        return parse_body(CrawlMessage, queued.body)
    except MalformedMessage as exc:
        return exc


async def _pack(batch: Parsed, services: Services, time_left: Callable[[], float]) -> Parsed:
    """More messages for a batch whose hosts cannot use the crawl's concurrency.

    The queue gives a host to one fetcher at a time and fills a batch from one host first, so a
    batch often holds one host: at ``concurrency_per_domain`` 8 of ``concurrency`` 32 it would
    pay for a function running at a quarter of its concurrency. While the batch's hosts x their
    cap stay under the concurrency, receive more (each receive brings other hosts: those of the
    batch are held by it), at most ``pack_receives`` times and only with time to visit them.
    A single-host crawl costs one empty receive per batch."""
    rounds = services.tuning.pack_receives
    first = next((m for _, m in batch if isinstance(m, CrawlMessage)), None)
    if first is None or rounds <= 0 or time_left() < PACK_MIN_TIME_S:
        return []
    try:
        politeness = services.spec(first.crawl).politeness
    except (UnknownCrawl, SpecError, OSError):  # the batch's own visit says what is wrong with the crawl
        return []
    wanted = math.ceil(politeness.concurrency / politeness.concurrency_per_domain)
    hosts = {host_key(m.tasks[0].url) for _, m in batch if isinstance(m, CrawlMessage)}
    extra: Parsed = []
    for _ in range(rounds):
        if len(hosts) >= wanted or time_left() < PACK_MIN_TIME_S:
            break
        try:
            received = await asyncio.to_thread(services.queue.receive_more, first.run_id, services.tuning.batch_size)
        except StoreError as exc:  # packing is an optimisation: visit the batch as it is
            logger.warning("packing receive failed", extra={"error": repr(exc)})
            break
        if not received:
            break
        for queued in received:
            message = _parse(queued)
            extra.append((queued, message))
            if isinstance(message, CrawlMessage):
                hosts.add(host_key(message.tasks[0].url))
    if extra:
        logger.info("batch packed", extra={"messages": len(extra), "hosts": len(hosts), "wanted": wanted})
    return extra


@dataclass
class _Visited:
    """A batch's URLs after every visit ended and the visits were written."""

    order: list[BatchUrl]
    """The URLs visited, in the order of ``outcomes``."""
    outcomes: list[Visit | Retry | BaseException]
    counted: Progress
    fetch_ms: int
    write_ms: int
    chunks: int


class _RunBatch:
    """The messages of one run in one batch."""

    def __init__(
        self,
        services: Services,
        container: Container,
        crawl: str,
        run_id: str,
        group: list[tuple[QueuedMessage, CrawlMessage]],
        time_left: Callable[[], float],
    ) -> None:
        self.services, self.container, self.crawl, self.run_id = services, container, crawl, run_id
        self.group, self.time_left = group, time_left
        self.log = {"crawl": crawl, "run_id": run_id}

    async def visit(self) -> Results:
        """Every URL of the group visited and written; per message, done or back to the queue."""
        services = self.services
        annotate(crawl=self.crawl, run_id=self.run_id)  # a batch of several runs keeps the last one's
        run = await asyncio.to_thread(services.ledger.get_run, self.crawl, self.run_id)
        if run is None:
            raise MalformedMessage(f"run {self.run_id} of crawl {self.crawl!r} does not exist")
        if run.status != "running":
            logger.warning("messages for a closed run dropped", extra={**self.log, "messages": len(self.group)})
            return {queued.message_id: None for queued, _ in self.group}
        spec = services.spec(self.crawl)
        await self._refill_backlog()
        by_url = self._by_url()
        todo = await self._not_done(by_url)
        fetcher = await self._fetcher(spec)
        hosts = await self._adopt_hosts(fetcher, run, todo)
        archive = _archive(self.crawl, self.run_id) if spec.output.archive else None
        visited = await self._visit_and_write(run, spec, fetcher, archive, todo, hosts)
        if isinstance(fetcher, PageFetcher):
            await self._hand_on_hosts(fetcher, hosts)
        results = await self._answer(visited)
        self._log_done(visited, hosts, urls=len(by_url), archive=archive)
        return results

    async def _refill_backlog(self) -> None:
        """A host's next wave of seeds, before the batch can be acknowledged (a failure redelivers, which re-sends)."""
        refills = [(t.backlog, q.receive_count > 1 or t.again) for q, m in self.group for t in m.tasks if t.backlog]
        if refills:
            await asyncio.to_thread(send_backlog, self.services, self.crawl, self.run_id, refills)

    def _by_url(self) -> dict[str, tuple[QueuedMessage, UrlTask]]:
        """Each URL of the group by its hash, with the message that holds it: a URL twice in a batch is visited once."""
        by_url: dict[str, tuple[QueuedMessage, UrlTask]] = {}
        for queued, message in self.group:
            for task in message.tasks:
                by_url.setdefault(url_hash(task.url), (queued, task))
        return by_url

    async def _not_done(self, by_url: dict[str, tuple[QueuedMessage, UrlTask]]) -> list[BatchUrl]:
        """The URLs no earlier delivery counted. Only a message seen before, or a task sent again, can hold a URL
        already done: only those are looked up (a duplicate SQS delivery, which SQS makes rarely, is fetched
        again and counted once)."""
        maybe_done = [h for h, (q, t) in by_url.items() if q.receive_count > 1 or t.again]
        known = await asyncio.to_thread(self.services.frontier.entries, self.run_id, maybe_done) if maybe_done else {}
        return [(h, q, t) for h, (q, t) in by_url.items() if not _done(known.get(h))]

    async def _visit_and_write(
        self,
        run: RunState,
        spec: CrawlSpec,
        fetcher: PageFetcher | SecretUnavailable,
        archive: BatchArchive | None,
        todo: list[BatchUrl],
        hosts: list[str],
    ) -> _Visited:
        """Every URL visited to its end, then written: one URL's crash must not leave the others in flight on an
        event loop that stops (and is frozen) when the handler returns. Half the batch's pages may be written
        while the other half is fetched (:class:`~sluice.pipeline.visit.writer.ChunkedWrites`)."""
        pages = PageVisitor(
            spec=spec,
            fetcher=fetcher,
            scope=Scope.from_spec(spec),
            slots=asyncio.Semaphore(max(1, spec.politeness.concurrency)),
            max_receives=self.services.tuning.max_receive_count,
            time_left=self.time_left,
            clock=self.services.clock,
            archive=archive,
            objects=self.services.objects,
            log=self.log,
        )
        first, awaiting = _visit_order(spec, todo)
        early = early_chunk(len(first), archive, self.services.tuning.early_write_urls)
        writes = ChunkedWrites(ChunkWriter(self.services, self.container, run, spec, archive, self.log), early)

        async def visit_and_add(task: UrlTask, queued: QueuedMessage) -> Visit | Retry:
            outcome = await pages.visit(task, queued)
            if isinstance(outcome, Visit):
                writes.add(outcome)
            return outcome

        started = time.monotonic()
        try:
            with traced("fetch pages", urls=len(todo), hosts=len(hosts)):
                outcomes = await asyncio.gather(*(visit_and_add(t, q) for _, q, t in first), return_exceptions=True)
                stale: dict[str, str] = {}
                if awaiting:
                    awaiting, stale = await self._fresh_carry(awaiting, first, outcomes)
                    outcomes += await asyncio.gather(
                        *(pages.visit(t, q) for _, q, t in awaiting), return_exceptions=True
                    )
                for outcome in outcomes[len(first) :]:
                    if isinstance(outcome, Visit):
                        if stale:
                            outcome.result = mark_stale(outcome.result, stale)
                        writes.add(outcome)
            fetched_at = time.monotonic()
            with traced("write batch", pages=sum(isinstance(o, Visit) for o in outcomes)):
                counted = sum(await writes.finish(), Progress())
        finally:
            await writes.settle()
        return _Visited(
            order=[*first, *awaiting],
            outcomes=list(outcomes),
            counted=counted,
            fetch_ms=round((fetched_at - started) * 1000),
            write_ms=round((time.monotonic() - fetched_at) * 1000),
            chunks=writes.chunks,
        )

    async def _answer(self, visited: _Visited) -> Results:
        """Per message: done, or back to the queue after its backoff (a URL crashed, or must be tried again)."""
        retry_after: dict[str, tuple[float, list[str]]] = {}
        crashed: dict[str, BaseException] = {}
        for (_, queued, task), outcome in zip(visited.order, visited.outcomes, strict=True):
            if isinstance(outcome, Retry):
                wait, reasons = retry_after.get(queued.message_id, (0.0, []))
                retry_after[queued.message_id] = (
                    max(wait, outcome.failure.retry_after_s or 0.0),
                    [*reasons, f"{task.url}: {outcome.failure.reason}"],
                )
            elif isinstance(outcome, BaseException):
                logger.error("page crashed", extra={**self.log, "url": task.url, "error": repr(outcome)})
                crashed.setdefault(queued.message_id, outcome)
        results: Results = {}
        rng = self.container.rng
        for queued, _ in self.group:
            if queued.message_id in crashed:
                results[queued.message_id] = await return_later(
                    self.services, rng, queued, 0.0, crashed[queued.message_id]
                )
            elif queued.message_id in retry_after:
                wait, reasons = retry_after[queued.message_id]
                retry = RetryLater(wait, "; ".join(sorted(set(reasons))[:5]))
                results[queued.message_id] = await return_later(self.services, rng, queued, wait, retry)
                logger.info("message returned to the queue", extra={**self.log, "reason": retry.reason})
            else:
                results[queued.message_id] = None
        return results

    def _log_done(self, visited: _Visited, hosts: list[str], *, urls: int, archive: BatchArchive | None) -> None:
        archived: dict[str, Any] = {}
        if archive is not None:
            archived = {
                "archive_files": archive.files,
                "archive_bytes": archive.written,
                "archive_ms": round(archive.seconds * 1000, 1),
            }
        logger.info(
            "batch done",
            extra={
                **self.log,
                "messages": len(self.group),
                "hosts": hosts[:5],
                "host_count": len(hosts),
                "urls": urls,
                "already_done": urls - len(visited.order),
                "counted": visited.counted.done,
                "records": visited.counted.records,
                "links_claimed": visited.counted.claimed,
                "retries": sum(isinstance(o, Retry) for o in visited.outcomes),
                "fetch_ms": visited.fetch_ms,
                "write_ms": visited.write_ms,
                "write_chunks": visited.chunks,
                **archived,
            },
        )

    async def _fresh_carry(
        self, awaiting: list[BatchUrl], first: list[BatchUrl], outcomes: Sequence[Visit | Retry | BaseException]
    ) -> tuple[list[BatchUrl], dict[str, str]]:
        """Pages seeded from the catalog with carried data, each with what its linking page carried to it this
        run (:func:`sluice.pipeline.visit.carried.refresh`): from this batch, or from a batch that ended before; and,
        by URL, why a page could not have it (it keeps the catalog's data, counted ``carry_stale``)."""
        in_batch = {
            parent_id(t.url): o.result for (_, _, t), o in zip(first, outcomes, strict=True) if isinstance(o, Visit)
        }
        tasks = [t for _, _, t in awaiting]
        got = await asyncio.to_thread(
            refresh, self.services, self.crawl, self.run_id, tasks, in_batch, self.container.carried
        )
        if got.refreshed:
            logger.info("carried data refreshed", extra={**self.log, "pages": got.refreshed})
        return [(h, q, t) for (h, q, _), t in zip(awaiting, got.tasks, strict=True)], got.stale

    async def _fetcher(self, spec: CrawlSpec) -> PageFetcher | SecretUnavailable:
        """The container's fetcher for the crawl, sharing robots.txt with the run; or why it cannot be made."""
        try:
            fetcher = await self.container.fetcher(spec, self.services.secrets, self.services.clock)
        except SecretUnavailable as exc:
            logger.error(
                "secret unavailable",
                extra={**self.log, "secret": exc.name, "reason": exc.why, "retryable": exc.retryable},
            )
            return exc
        if not isinstance(fetcher.robots_store, SharedRobots) or fetcher.robots_store.run_id != self.run_id:
            services = self.services
            fetcher.robots_store = SharedRobots(services.objects, self.crawl, self.run_id, clock=services.clock)
        return fetcher

    async def _adopt_hosts(
        self, fetcher: PageFetcher | SecretUnavailable, run: RunState, todo: Sequence[BatchUrl]
    ) -> list[str]:
        """Take up each host of the batch where the fleet's last holder of it left it."""
        if not isinstance(fetcher, PageFetcher):
            return []
        # A host may pause the crawl an hour at most, and never past the run.
        fetcher.gate.pause_cap_s = max(0.0, min(MAX_PAUSE_S, run.seconds_left(self.services.clock.now())))
        book = self.services.hosts
        hosts = sorted({host_key(t.url) for _, _, t in todo})
        if book is None or not hosts:
            return []
        known = await asyncio.to_thread(book.load, hosts)
        fetcher.gate.adopt(self.run_id, {h: known.get(h) or HostState(h) for h in hosts})
        return hosts

    async def _hand_on_hosts(self, fetcher: PageFetcher, hosts: list[str]) -> None:
        """Leave for the next holder of each host what it must know (after the batch is counted)."""
        book = self.services.hosts
        states = fetcher.gate.export(self.run_id, hosts) if book is not None and hosts else []
        if book is None or not states:
            return
        try:
            await asyncio.to_thread(book.save, states)
        except StoreError as exc:  # the pages are counted: failing the batch now would only fetch them again
            logger.warning("host states not written", extra={**self.log, "hosts": len(states), "error": repr(exc)})
        for state in states:
            was = fetcher.gate.known(state.host)
            tripped = state.counts(self.run_id).tripped
            if tripped and (was is None or was.counts(self.run_id).tripped is None):
                logger.warning("host blocked for the run", extra={**self.log, "host": state.host, "reason": tripped})


def _visit_order(spec: CrawlSpec, todo: list[BatchUrl]) -> tuple[list[BatchUrl], list[BatchUrl]]:
    """The batch's URLs in the order they take the concurrency slots: the pages visited first, then those seeded
    with carried data (their linking page may be one of the first). Each one host at a time in turn
    (:func:`by_host_in_turn`): in message order, the first host's URLs would hold every slot while they wait on
    that host's cap, and the hosts packed with it idle."""
    first = by_host_in_turn([url for url in todo if not awaits_parent(spec, url[2])])
    awaiting = by_host_in_turn([url for url in todo if awaits_parent(spec, url[2])])
    return first, awaiting


def by_host_in_turn(items: list[BatchUrl]) -> list[BatchUrl]:
    """``items`` one host at a time in turn (each host's in their own order): the order a batch's URLs take the
    spec's concurrency slots in, so that no host's URLs hold slots while they wait on its cap."""
    by_host: dict[str, list[BatchUrl]] = {}
    for item in items:
        by_host.setdefault(host_key(item[2].url), []).append(item)
    if len(by_host) < 2:
        return items
    return [item for row in zip_longest(*by_host.values()) for item in row if item is not None]


def _archive(crawl: str, run_id: str) -> BatchArchive:
    # warcio (~40 ms to import) only for specs that keep their responses: the others' cold starts stay as they were.
    from sluice.pipeline.visit.archive import BatchArchive

    return BatchArchive(crawl, run_id)


def _done(entry: UrlEntry | None) -> bool:
    return entry is not None and entry.done

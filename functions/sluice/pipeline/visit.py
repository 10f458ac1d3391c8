"""Visit a batch of queue messages: fetch every URL, and write what the batch learned in one or two chunks.

Per URL: a fetch (conditional when the catalog run knew the page) and extraction. Per chunk (with
``Tuning.early_write_urls``, locally, a batch writes its first half while its second half is fetched,
:mod:`sluice.pipeline.writer`; otherwise, or when it archives, a batch is one chunk): one part object
with the chunk's fetched pages' records, one claim per new link and one send for them, one
conditional write per URL that counts it (its :class:`PageResult`), one progress report. Every step
is safe to repeat and the order makes a crash at any line harmless:

0. with ``output.archive``, the batch's responses (a WARC file, :mod:`sluice.pipeline.archive`) are
   written before the part and any result (a crash leaves an unreferenced file);
1. the part is written before any result points at it (a crash leaves an unreferenced part);
2. links are claimed and sent before the page that found them is counted (a redelivered page
   sends again the links it claimed and that still wait);
3. the records table (if the spec asks for it) is upserted, each key once;
4. a URL's result is written only if none is there yet: redeliveries, regrouped batches and
   concurrent duplicates count it once, and their parts are never read;
5. the progress report comes last: it is a hint for the drain trigger, never a count.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import zip_longest
from typing import TYPE_CHECKING

from sluice.domain.backoff import Backoff
from sluice.domain.hosts import MAX_PAUSE_S, HostState, host_key
from sluice.domain.layout import frontier_key, part_key
from sluice.domain.pages import (
    BY_SCHEDULE,
    MAX_DIGESTS,
    MAX_REASON,
    PageResult,
    PartBlock,
    Prior,
    RecordCounts,
    UrlEntry,
    digest,
    record_digests,
    unpack_digests,
    url_hash,
)
from sluice.domain.recrawl import Schedule
from sluice.domain.runs import Progress, RunState, drained
from sluice.domain.secrets import Secret, SecretUnavailable
from sluice.domain.seedset import SeedSet
from sluice.extraction.charset import parser_input
from sluice.extraction.extract import Record, extract_page, record_line
from sluice.extraction.limits import PageTooComplex
from sluice.extraction.urls import Scope
from sluice.fetch.client import PageFetcher
from sluice.fetch.credentials import RequestCredentials
from sluice.fetch.outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
from sluice.fetch.proxies import with_route
from sluice.messages import CrawlMessage, MalformedMessage, QueuedMessage, UrlTask, parse_body
from sluice.observability import annotate, logger, traced
from sluice.pipeline.backlog import send_backlog
from sluice.pipeline.carried import MapCache, by_link, keep_kids, mark_stale, refresh
from sluice.pipeline.credentials import request_credentials
from sluice.pipeline.links import (
    ClaimCache,
    carried_data,
    children,
    claim_links,
    parent_id,
    unknown_beyond_depth,
    with_carried,
)
from sluice.pipeline.robots import SharedRobots
from sluice.pipeline.services import Services
from sluice.pipeline.writer import ChunkedWrites
from sluice.ports import Claims, SecretSource
from sluice.spec import CrawlSpec

_Item = tuple[str, QueuedMessage, UrlTask]
"""A URL of a batch to visit: its hash, the message that holds it, its task."""

if TYPE_CHECKING:
    from sluice.pipeline.archive import BatchArchive

IN_PROCESS_WAIT_CAP_S = 5.0
"""Longest backoff a fetcher sleeps through; longer waits go back to the queue as visibility."""
TIME_MARGIN_S = 20.0
"""A URL not started when the invocation has this little time left goes back to the queue."""
PACK_MIN_TIME_S = 2 * TIME_MARGIN_S
"""A batch is packed with more messages only while the invocation has this much time left."""
RECHECK_S = 60.0
"""After the finalizer found a run not drained, fetchers wait this long before asking again."""


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


@dataclass
class Container:
    """What outlives an invocation in one container: fetchers (pools, robots caches, the credentials
    their requests carry), the secrets read, seed sets, link caches."""

    allow_loopback: bool
    rng: random.Random = field(default_factory=random.Random)
    fetchers: dict[str, PageFetcher] = field(default_factory=dict)
    seeds: dict[str, SeedSet] = field(default_factory=dict)
    claims: dict[str, ClaimCache] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)
    """Each secret a spec names, read once per container (a new container reads a rotated value)."""
    carried: MapCache = field(default_factory=MapCache)
    """What linking pages carried along their links, as read from their parts (the last few)."""

    async def fetcher(self, spec: CrawlSpec, source: SecretSource | None) -> PageFetcher:
        """The crawl's fetcher, made on first use with the spec's ``request`` section resolved.

        Raises :class:`SecretUnavailable` when a secret it names cannot be read: nothing is cached
        then, so the next batch asks the store again."""
        if spec.name not in self.fetchers:
            credentials = await asyncio.to_thread(self._credentials, spec, source) if spec.request.configured else None
            self.fetchers[spec.name] = PageFetcher(
                spec.politeness, allow_loopback=self.allow_loopback, credentials=credentials
            )
        return self.fetchers[spec.name]

    def _credentials(self, spec: CrawlSpec, source: SecretSource | None) -> RequestCredentials:
        return request_credentials(spec, source, self.secrets)

    def seed_set(self, services: Services, crawl: str, run_id: str) -> SeedSet:
        if run_id not in self.seeds:
            data = services.objects.get(frontier_key(crawl, run_id))
            if data is None:
                raise RuntimeError(f"run {run_id} has no seed set at {frontier_key(crawl, run_id)}")
            while len(self.seeds) >= 4:  # a container serves one or two runs at a time
                self.seeds.pop(next(iter(self.seeds)))
            self.seeds[run_id] = SeedSet.from_bytes(data)
        return self.seeds[run_id]

    def claim_cache(self, run_id: str) -> ClaimCache:
        if run_id not in self.claims:
            while len(self.claims) >= 4:
                self.claims.pop(next(iter(self.claims)))
            self.claims[run_id] = ClaimCache()
        return self.claims[run_id]

    async def aclose(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.aclose()
        self.fetchers.clear()


Results = dict[str, BaseException | None]


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
            results[queued.message_id] = await _malformed(services, queued, message)
            continue
        runs.setdefault((message.crawl, message.run_id), []).append((queued, message))
    for (crawl, run_id), group in runs.items():
        try:
            results |= await _RunBatch(services, container, crawl, run_id, group, time_left).visit()
        except MalformedMessage as exc:
            for queued, _ in group:
                results[queued.message_id] = await _malformed(services, queued, exc)
        except Exception as exc:  # not swallowed: every message of the group fails, is retried, then dead-lettered
            logger.exception("batch failed", extra={"crawl": crawl, "run_id": run_id})
            for queued, _ in group:
                results[queued.message_id] = await _return(services, container, queued, 0.0, exc)
    if extra:
        done = [queued.receipt_handle for queued, _ in extra if results.pop(queued.message_id, None) is None]
        try:
            await asyncio.to_thread(services.queue.delete, done)
        except Exception as exc:  # counted already: they come back after their visibility and are found done
            logger.warning("packed messages not deleted", extra={"messages": len(done), "error": repr(exc)})
    return results


def _parse(queued: QueuedMessage) -> CrawlMessage | MalformedMessage:
    try:
        return parse_body(CrawlMessage, queued.body)
    except MalformedMessage as exc:
        return exc


Parsed = list[tuple[QueuedMessage, CrawlMessage | MalformedMessage]]


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
    except Exception:  # the batch's own visit says what is wrong with the crawl
        return []
    wanted = math.ceil(politeness.concurrency / politeness.concurrency_per_domain)
    hosts = {host_key(m.tasks[0].url) for _, m in batch if isinstance(m, CrawlMessage)}
    extra: Parsed = []
    for _ in range(rounds):
        if len(hosts) >= wanted or time_left() < PACK_MIN_TIME_S:
            break
        try:
            received = await asyncio.to_thread(services.queue.receive_more, first.run_id, services.tuning.batch_size)
        except Exception as exc:  # packing is an optimisation: visit the batch as it is
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


async def _malformed(services: Services, queued: QueuedMessage, exc: MalformedMessage) -> MalformedMessage:
    # It can never succeed: visible again at once, it reaches the dead-letter queue after its
    # maximum receives in seconds, not after that many visibility timeouts.
    logger.error("malformed message", extra={"message_id": queued.message_id, "reason": str(exc)})
    await _change_visibility(services, queued, 0)
    return exc


async def _return(
    services: Services, container: Container, queued: QueuedMessage, retry_after_s: float, exc: BaseException
) -> BaseException:
    tuning = services.tuning
    delay = visibility_backoff(
        queued.receive_count, retry_after_s, container.rng, base=tuning.visibility_base_s, cap=tuning.visibility_max_s
    )
    await _change_visibility(services, queued, delay)
    return exc


async def _change_visibility(services: Services, queued: QueuedMessage, delay_s: int) -> None:
    try:
        await asyncio.to_thread(services.queue.return_after, queued.receipt_handle, delay_s)
    except Exception as exc:  # reported failed all the same; it comes back after its visibility timeout
        # Raising here would fail the whole batch, done messages included.
        logger.warning(
            "visibility not changed", extra={"message_id": queued.message_id, "delay_s": delay_s, "error": repr(exc)}
        )


@dataclass(slots=True)
class _Visit:
    """One URL's visit, before the batch writes it: its result, its records, the links it found."""

    task: UrlTask
    result: PageResult
    records: list[Record] = field(default_factory=list)
    links: list[UrlTask] = field(default_factory=list)
    upserts: list[Record] = field(default_factory=list)
    beyond_depth: list[str] = field(default_factory=list)
    """Links of a page at follow.max_depth, not followed: counted, if the run does not know them."""


@dataclass(slots=True)
class _Retry:
    task: UrlTask
    failure: Failed


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
        services = self.services
        annotate(crawl=self.crawl, run_id=self.run_id)  # a batch of several runs keeps the last one's
        run = await asyncio.to_thread(services.ledger.get_run, self.crawl, self.run_id)
        if run is None:
            raise MalformedMessage(f"run {self.run_id} of crawl {self.crawl!r} does not exist")
        if run.status != "running":
            logger.warning("messages for a closed run dropped", extra={**self.log, "messages": len(self.group)})
            return {queued.message_id: None for queued, _ in self.group}
        spec = services.spec(self.crawl)
        scope = Scope.from_spec(spec)
        # A host's next wave of seeds, before the batch can be acknowledged (a failure redelivers, which re-sends).
        refills = [(t.backlog, q.receive_count > 1 or t.again) for q, m in self.group for t in m.tasks if t.backlog]
        if refills:
            await asyncio.to_thread(send_backlog, services, self.crawl, self.run_id, refills)
        owner: dict[str, tuple[QueuedMessage, UrlTask]] = {}
        for queued, message in self.group:
            for task in message.tasks:
                owner.setdefault(url_hash(task.url), (queued, task))  # a URL twice in a batch is visited once
        # Only a message seen before, or a task sent again, can hold a URL already done: look those up.
        # (A duplicate SQS delivery, which SQS makes rarely, is fetched again and counted once.)
        maybe_done = [h for h, (q, t) in owner.items() if q.receive_count > 1 or t.again]
        known = await asyncio.to_thread(services.frontier.entries, self.run_id, maybe_done) if maybe_done else {}
        todo = [(h, q, t) for h, (q, t) in owner.items() if not _done(known.get(h))]
        fetcher = await self._fetcher(spec)
        if isinstance(fetcher, PageFetcher):  # a host may pause the crawl an hour at most, and never past the run
            fetcher.gate.pause_cap_s = max(0.0, min(MAX_PAUSE_S, run.seconds_left()))
        hosts = await self._adopt_hosts(fetcher, todo) if isinstance(fetcher, PageFetcher) else []
        limit = asyncio.Semaphore(max(1, spec.politeness.concurrency))
        max_receives = services.tuning.max_receive_count
        archive = _archive(self.crawl, self.run_id) if spec.output.archive else None

        async def one(task: UrlTask, queued: QueuedMessage) -> _Visit | _Retry:
            async with limit:
                # Every visit ends before the invocation must write its batch: a URL still waiting (on a
                # slow site, a host's delay, a retry) when the budget runs out goes back to the queue.
                budget = self.time_left() - TIME_MARGIN_S
                if budget <= 0:
                    return _Retry(task, Failed(task.url, "invocation time running out", True))
                if not scope.allows(task.url):
                    return _Visit(task, _skipped(task, "out of the crawl's scope"))
                started = time.monotonic()
                last_try = queued.receive_count >= max_receives
                if isinstance(fetcher, SecretUnavailable):  # every page fails with the reason (retried if it may pass)
                    failure = Failed(task.url, str(fetcher), fetcher.retryable)
                    if fetcher.retryable and not last_try:
                        return _Retry(task, failure)
                    return _Visit(task, _failed(task, failure, task.prior.prior() if task.prior else None))
                try:
                    visit = await asyncio.wait_for(
                        _visit_url(spec, fetcher, task, last_try=last_try, clock=services.clock, archive=archive),
                        None if math.isinf(budget) else budget,
                    )
                except TimeoutError:
                    return _Retry(task, Failed(task.url, "invocation time running out", True))
                if isinstance(visit, _Visit):
                    visit.result = replace(
                        visit.result,
                        ms=round((time.monotonic() - started) * 1000),
                        type=_page_type(spec, visit),
                        via=task.via,
                        carry=task.carry,
                        parent=task.parent if task.carry else None,
                    )
                    visit.result = with_route(visit.result, fetcher.route(task.url))
                    for proxy, why, ejected in visit.result.proxy_failures:
                        if ejected:  # by its spec name and our words: never its address or credentials
                            logger.warning("proxy ejected", extra={**self.log, "proxy": proxy, "reason": why})
                if archive is not None and archive.full:  # a batch of large bodies writes more than one file
                    try:
                        await asyncio.to_thread(archive.flush, services.objects)
                    except Exception as exc:  # remembered: the batch's own flush raises it before anything counts
                        logger.warning("archive file not written", extra={**self.log, "error": repr(exc)})
                return visit

        # Every URL runs to its end before the batch is written: one URL's crash must not leave the
        # others in flight on an event loop that stops (and is frozen) when the handler returns.
        # A page seeded with carried data goes after the batch's other pages: its linking page may be one.
        # The batch's URLs take the concurrency slots one host at a time in turn: in message order, the first
        # host's URLs would hold every slot while they wait on that host's cap, and the hosts packed with it idle.
        later = by_host_in_turn([item for item in todo if _awaits_parent(spec, item[2])])
        first = by_host_in_turn([item for item in todo if not _awaits_parent(spec, item[2])])
        todo = [*first, *later]
        # Half the batch's pages are written while the other half is fetched (pipeline/writer.py).
        early = _early_chunk(len(first), archive, services.tuning.early_write_urls)
        writes = ChunkedWrites(partial(self._write, run, spec, archive=archive), early)

        async def visited(task: UrlTask, queued: QueuedMessage) -> _Visit | _Retry:
            outcome = await one(task, queued)
            if isinstance(outcome, _Visit):
                writes.add(outcome)
            return outcome

        started = time.monotonic()
        try:
            with traced("fetch pages", urls=len(todo), hosts=len(hosts)):
                outcomes = await asyncio.gather(*(visited(t, q) for _, q, t in first), return_exceptions=True)
                if later:
                    later, stale = await self._fresh_carry(later, first, outcomes)
                    todo = [*first, *later]
                    for outcome in await asyncio.gather(*(one(t, q) for _, q, t in later), return_exceptions=True):
                        if isinstance(outcome, _Visit):
                            if stale:
                                outcome.result = mark_stale(outcome.result, stale)
                            writes.add(outcome)
                        outcomes.append(outcome)
            fetched_at = time.monotonic()
            with traced("write batch", pages=sum(isinstance(o, _Visit) for o in outcomes)):
                counted = sum(await writes.finish(), Progress())
        finally:
            await writes.settle()
        write_ms = round((time.monotonic() - fetched_at) * 1000)
        if isinstance(fetcher, PageFetcher):
            await self._hand_on_hosts(fetcher, hosts)
        failed_by: dict[str, tuple[float, list[str]]] = {}
        crashed: dict[str, BaseException] = {}
        for (_, queued, task), outcome in zip(todo, outcomes, strict=True):
            if isinstance(outcome, _Retry):
                wait, reasons = failed_by.get(queued.message_id, (0.0, []))
                failed_by[queued.message_id] = (
                    max(wait, outcome.failure.retry_after_s or 0.0),
                    [*reasons, f"{task.url}: {outcome.failure.reason}"],
                )
            elif isinstance(outcome, BaseException):
                logger.error("page crashed", extra={**self.log, "url": task.url, "error": repr(outcome)})
                crashed.setdefault(queued.message_id, outcome)
        results: Results = {}
        for queued, _ in self.group:
            if queued.message_id in crashed:
                results[queued.message_id] = await _return(
                    services, self.container, queued, 0.0, crashed[queued.message_id]
                )
            elif queued.message_id in failed_by:
                wait, reasons = failed_by[queued.message_id]
                retry = RetryLater(wait, "; ".join(sorted(set(reasons))[:5]))
                results[queued.message_id] = await _return(services, self.container, queued, wait, retry)
                logger.info("message returned to the queue", extra={**self.log, "reason": retry.reason})
            else:
                results[queued.message_id] = None
        logger.info(
            "batch done",
            extra={
                **self.log,
                "messages": len(self.group),
                "hosts": hosts[:5],
                "host_count": len(hosts),
                "urls": len(owner),
                "already_done": len(owner) - len(todo),
                "counted": counted.done,
                "records": counted.records,
                "links_claimed": counted.claimed,
                "retries": sum(isinstance(o, _Retry) for o in outcomes),
                "fetch_ms": round((fetched_at - started) * 1000),
                "write_ms": write_ms,
                "write_chunks": writes.chunks,
                **(
                    {
                        "archive_files": archive.files,
                        "archive_bytes": archive.written,
                        "archive_ms": round(archive.seconds * 1000, 1),
                    }
                    if archive is not None
                    else {}
                ),
            },
        )
        return results

    async def _fresh_carry(
        self,
        later: list[tuple[str, QueuedMessage, UrlTask]],
        first: list[tuple[str, QueuedMessage, UrlTask]],
        outcomes: Sequence[_Visit | _Retry | BaseException],
    ) -> tuple[list[tuple[str, QueuedMessage, UrlTask]], dict[str, str]]:
        """Pages seeded from the catalog with carried data, each with what its linking page carried to it this
        run (:func:`sluice.pipeline.carried.refresh`): from this batch, or from a batch that ended before; and,
        by URL, why a page could not have it (it keeps the catalog's data, counted ``carry_stale``)."""
        in_batch = {
            parent_id(t.url): o.result for (_, _, t), o in zip(first, outcomes, strict=True) if isinstance(o, _Visit)
        }
        tasks = [t for _, _, t in later]
        got = await asyncio.to_thread(
            refresh, self.services, self.crawl, self.run_id, tasks, in_batch, self.container.carried
        )
        if got.refreshed:
            logger.info("carried data refreshed", extra={**self.log, "pages": got.refreshed})
        return [(h, q, t) for (h, q, _), t in zip(later, got.tasks, strict=True)], got.stale

    async def _fetcher(self, spec: CrawlSpec) -> PageFetcher | SecretUnavailable:
        """The container's fetcher for the crawl, sharing robots.txt with the run; or why it cannot be made."""
        try:
            fetcher = await self.container.fetcher(spec, self.services.secrets)
        except SecretUnavailable as exc:
            logger.error(
                "secret unavailable",
                extra={**self.log, "secret": exc.name, "reason": exc.why, "retryable": exc.retryable},
            )
            return exc
        if not isinstance(fetcher.robots_store, SharedRobots) or fetcher.robots_store.run_id != self.run_id:
            fetcher.robots_store = SharedRobots(self.services.objects, self.crawl, self.run_id)
        return fetcher

    async def _adopt_hosts(self, fetcher: PageFetcher, todo: Sequence[tuple[str, QueuedMessage, UrlTask]]) -> list[str]:
        """Take up each host of the batch where the fleet's last holder of it left it."""
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
        except Exception as exc:  # the pages are counted: failing the batch now would only fetch them again
            logger.warning("host states not written", extra={**self.log, "hosts": len(states), "error": repr(exc)})
        for state in states:
            was = fetcher.gate.known(state.host)
            tripped = state.counts(self.run_id).tripped
            if tripped and (was is None or was.counts(self.run_id).tripped is None):
                logger.warning("host blocked for the run", extra={**self.log, "host": state.host, "reason": tripped})

    def _write(self, run: RunState, spec: CrawlSpec, visits: list[_Visit], *, archive: BatchArchive | None) -> Progress:
        """A chunk of the batch's writes, in the order that makes a crash anywhere harmless (see the module doc);
        what it counted."""
        services = self.services
        if archive is not None:
            archive.flush(services.objects)  # before the part and every result that refers to it
        part = _Part(part_key(self.crawl, self.run_id, uuid.uuid4().hex))
        results = [part.add(v) for v in visits]
        if part.body:
            services.objects.put(part.key, bytes(part.body), "application/x-ndjson")
        found = [link for v in visits for link in v.links]
        claimed = 0
        if found or any(v.beyond_depth for v in visits):
            seeds = self.container.seed_set(services, self.crawl, self.run_id)
            cache = self.container.claim_cache(self.run_id)
            claims = claim_links(services, run, spec, found, seeds, cache) if found else Claims()
            claimed = len(claims.won)
            results = _with_limits(results, visits, claims, seeds, cache)
        if services.records is not None and spec.output.records_table:
            # Before counting, so that a batch that dies after counting has already upserted (upserts are
            # idempotent); each key once, as one BatchWriteItem must name an item once.
            upserts = list({rec.identity: rec for v in visits for rec in v.upserts}.values())
            if upserts:
                services.records.upsert(self.crawl, self.run_id, upserts)
        counted = services.frontier.complete(self.run_id, results) if results else []
        won = [r for r, ok in zip(results, counted, strict=True) if ok]
        for result in won:
            _log_page(self.log, result)
        progress = Progress(
            claimed=claimed,
            done=len(won),
            records=sum(r.records for r in won),
            failed=sum(r.outcome == "failed" for r in won),
        )
        # Each chunk reports what it counted: a worker dying between two chunks must not leave the first
        # one's pages out of the drain trigger's sum, as nothing would ever count them again.
        if progress != Progress():
            services.frontier.add_progress(self.run_id, progress)
        if won:
            self._finalize_if_drained()
        return progress

    def _finalize_if_drained(self) -> None:
        services = self.services
        run = services.ledger.get_run(self.crawl, self.run_id)
        if run is None or run.checked_within(RECHECK_S):
            return
        if drained(run, lambda: services.frontier.progress(self.run_id)):
            logger.info("run looks drained: asking the finalizer", extra=self.log)
            services.finalize_later({"crawl": self.crawl, "run_id": self.run_id})


def _archive(crawl: str, run_id: str) -> BatchArchive:
    # warcio (~40 ms to import) only for specs that keep their responses: the others' cold starts stay as they were.
    from sluice.pipeline.archive import BatchArchive

    return BatchArchive(crawl, run_id)


def _early_chunk(urls: int, archive: BatchArchive | None, min_urls: int) -> int:
    """After how many visited pages a batch of ``urls`` starts writing (0: once fetched), for
    ``Tuning.early_write_urls`` ``min_urls`` (0: off). With ``output.archive`` the batch is written whole:
    the archive's file is added to on the loop while a chunk would flush it."""
    if archive is not None or min_urls <= 0 or urls < min_urls:
        return 0
    return (urls + 1) // 2


def _done(entry: UrlEntry | None) -> bool:
    return entry is not None and entry.done


class _Part:
    """The batch's records as one JSON Lines object; each page's lines are one contiguous block."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.body = bytearray()

    def add(self, visit: _Visit) -> PageResult:
        return self.add_records(visit.result, visit.records)

    def add_records(self, result: PageResult, records: list[Record]) -> PageResult:
        """The page's records as one block of the part; its result pointing at the block (unchanged if none). A map
        of what it carried along its links too large for the result goes in the part too (:func:`keep_kids`)."""
        result = keep_kids(result, self.key.rsplit("/", 1)[-1].removesuffix(".jsonl"), self.body)
        if not records:
            return result
        start = len(self.body)
        for record in records:
            self.body += record_line(record).encode()
        block = PartBlock(self.key.rsplit("/", 1)[-1].removesuffix(".jsonl"), start, len(self.body) - start)
        return replace(result, block=block)


def _with_limits(
    results: list[PageResult], visits: list[_Visit], claims: Claims, seeds: SeedSet, cache: ClaimCache
) -> list[PageResult]:
    """Each page's result with the links the run's limits left out: new links over ``max_pages``, and
    unknown links of a page at ``max_depth`` (the summary says how much a limit cut the crawl)."""
    capped = Counter(t.parent for t in claims.capped)
    limited = []
    for result, visit in zip(results, visits, strict=True):
        over = capped.get(parent_id(result.url), 0)
        beyond = unknown_beyond_depth(visit.beyond_depth, seeds, cache) if visit.beyond_depth else 0
        limited.append(replace(result, capped_links=over, beyond_depth=beyond) if over or beyond else result)
    return limited


def _log_page(log: dict[str, str], result: PageResult) -> None:
    if result.outcome in ("failed", "skipped"):
        logger.warning(
            f"page {result.outcome}",
            extra={**log, "url": result.url, "reason": result.reason, "status": result.status},
        )


def _skipped(task: UrlTask, reason: str) -> PageResult:
    return PageResult(url=task.url, depth=task.depth, origin=task.origin, outcome="skipped", reason=reason[:MAX_REASON])


async def _visit_url(
    spec: CrawlSpec,
    fetcher: PageFetcher,
    task: UrlTask,
    *,
    last_try: bool,
    clock: Callable[[], float] = time.time,
    archive: BatchArchive | None = None,
) -> _Visit | _Retry:
    prior = task.prior.prior() if task.prior is not None else None
    if prior is not None and prior.not_due(task.lastmod):
        # A sitemap says the page has not changed since its last fetch: not asked at all, carried as a 304 is.
        return _Visit(task, _carried(task, prior, Validators(prior.etag, prior.last_modified), None, due=False))
    schedule = spec.recrawl.schedule() if spec.recrawl is not None else None
    if schedule is not None and prior is not None and _not_due_yet(schedule, task, prior, int(clock())):
        # Its recrawl interval has not run out: not asked, carried as a page a sitemap says is unchanged.
        known = Validators(prior.etag, prior.last_modified)
        return _Visit(task, _carried(task, prior, known, None, due=False, why=BY_SCHEDULE))
    # Ask "changed since?" only when a 304 can stand for the records (they are in the catalog run's output).
    conditional = prior is not None and prior.carriable and bool(prior.etag or prior.last_modified)
    validators = Validators(prior.etag, prior.last_modified) if conditional and prior is not None else None
    outcome: FetchOutcome = await fetcher.fetch(task.url, validators, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
    if isinstance(outcome, NotModified) and (prior is None or not prior.carriable):
        outcome = await fetcher.fetch(task.url, None, retry_sleep_cap=IN_PROCESS_WAIT_CAP_S)
    now = int(clock())
    match outcome:
        case Failed() if outcome.retryable and not last_try:
            return _Retry(task, outcome)
        case Failed():
            return _Visit(task, _failed(task, outcome, prior))
        case Skipped():
            return _Visit(task, _skipped(task, outcome.reason))
        case NotModified():
            kept_validators = outcome.validators.or_else(validators)
            visit = _Visit(task, _carried(task, prior or Prior(), kept_validators, None, now=now))
        case Fetched():
            visit = _fetched(spec, task, prior, outcome, now)
            if archive is not None:
                # Compressed here, as the page is extracted here: on the loop it measured faster than in a
                # thread (bench/archive.py), and only the compressed record stays.
                ref = archive.add(task, outcome)
                if visit.result.holds_records:
                    visit.result = replace(visit.result, archive=ref)
    if schedule is not None and visit.result.outcome in ("fetched", "not_modified"):
        kept = prior.interval if prior is not None else None
        interval = schedule.next_interval(kept, changed=_changed(visit.result, prior))
        visit.result = replace(visit.result, interval=interval)
    return visit


def _not_due_yet(schedule: Schedule, task: UrlTask, prior: Prior, now: int) -> bool:
    """The recrawl schedule's say, for a page no sitemap lastmod decides: not due, and its records can be carried."""
    if task.lastmod is not None or not prior.carriable:
        return False  # a sitemap's lastmod knows better than a guess; records that cannot be carried are fetched
    return not schedule.due(prior.fetched_at, prior.interval, now, seed=task.depth == 0)


def _changed(result: PageResult, prior: Prior | None) -> bool:
    """Whether a fetch found the page changed: a record new, changed or gone from it (a 304 or the same body: none);
    for a page of links alone, its body (new links are all it has to give)."""
    if prior is None:
        return True
    counts = result.counts
    if counts.new or counts.changed or counts.unchanged < prior.records:
        return True
    return counts.total == 0 and result.body_hash != prior.body_hash


def _failed(task: UrlTask, outcome: Failed, prior: Prior | None = None) -> PageResult:
    return PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="failed",
        reason=outcome.reason[:MAX_REASON],
        status=outcome.status,
        # No records this run, but the digests of the last ones: the next run still tells them apart.
        digests=prior.digests if prior is not None else b"",
        interval=prior.interval if prior is not None else None,  # asked next run (no fetch time), from where it was
    )


def _carried(
    task: UrlTask,
    prior: Prior,
    validators: Validators,
    status: int | None,
    *,
    due: bool = True,
    now: int | None = None,
    why: str | None = None,
) -> PageResult:
    """A page whose records are the catalog run's (a 304, the same body again, or not due): counted, nothing
    rewritten. A page not due keeps the time of the fetch its records come from, and its interval, and says
    ``why`` (:data:`~sluice.domain.pages.BY_SCHEDULE`, or nothing for a sitemap); the others were fetched ``now``."""
    return PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="not_due" if not due else "not_modified" if status is None else "fetched",
        status=(status or 304) if due else None,  # a page not due was not asked: it has no status
        etag=validators.etag,
        last_modified=validators.last_modified,
        body_hash=prior.body_hash,
        counts=RecordCounts(unchanged=prior.records),
        digests=prior.digests,
        carried=prior.records > 0,
        fetched_at=now if due else prior.fetched_at,
        reason=None if due else why,
        interval=None if due else prior.interval,
        archive=prior.archive,  # no new response: the one its records come from (a fetch above replaces it)
    )


def _fetched(spec: CrawlSpec, task: UrlTask, prior: Prior | None, outcome: Fetched, now: int) -> _Visit:
    body_hash = outcome.content_hash
    if prior is not None and prior.carried and prior.body_hash == body_hash:
        # The same bytes as the catalog run saw: the same records and links (the spec is unchanged,
        # or the scheduler would not have said "carried"), so nothing is extracted or rewritten.
        return _Visit(task, _carried(task, prior, outcome.validators, outcome.status, now=now))
    try:
        extraction = extract_page(spec, outcome.final_url, parser_input(outcome.body, outcome.content_type), task.via)
    except PageTooComplex as exc:  # refused before parsing: failed for good, with the reason
        return _Visit(task, _failed(task, Failed(task.url, str(exc), False, outcome.status, None, 1), prior))
    records = _unique(with_carried(extraction.records, task.carry))
    packed = record_digests((r.identity, r.content_hash) for r in records) if len(records) <= MAX_DIGESTS else b""
    counts, upserts = _classify(records, prior)
    result = PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="fetched",
        status=outcome.status,
        etag=outcome.validators.etag,
        last_modified=outcome.validators.last_modified,
        body_hash=body_hash,
        counts=counts,
        items=extraction.items,
        missing={k: v for k, v in extraction.missing.items() if v and not _filled(k, task.carry)},
        rejected={k: v for k, v in extraction.rejected.items() if v},
        digests=packed,
        fallback_keys=sum(r.key_fallback for r in records),
        fetched_at=now,
        type=extraction.type,
    )
    carried, carry_dropped = carried_data(spec, extraction, records)
    found = children(task, extraction.links, spec, extraction.rules, carried)
    if found.dropped or extraction.links_dropped:
        result = replace(result, dropped_links=found.dropped + extraction.links_dropped)
    if carried:
        result = replace(result, kids=by_link(carried))
    if carry_dropped:
        result = replace(result, carry_dropped=dict(carry_dropped))
        logger.warning("carried fields dropped", extra={"url": task.url, "fields": dict(carry_dropped)})
    return _Visit(task, result, records, found.tasks, upserts, found.beyond_depth)


def _awaits_parent(spec: CrawlSpec, task: UrlTask) -> bool:
    """A page the catalog seeded with data its linking page carried: it takes that page's data of this run."""
    return spec.types is not None and task.awaits_linking_page


def _page_type(spec: CrawlSpec, visit: _Visit) -> str | None:
    """The type a page's result is counted under: what its extraction took it for (the final URL's), else what
    its URL and the rule that led there say (a page carried, failed or skipped was not extracted)."""
    if spec.types is None:
        return None
    return visit.result.type or spec.page_type(visit.task.url, visit.task.via)


def _filled(name: str, carry: dict[str, str | int | float | bool | None] | None) -> bool:
    """A field the page lacked but its linking page carried a value for: no record misses it."""
    return carry is not None and carry.get(name) is not None


def _unique(records: list[Record]) -> list[Record]:
    """A page's records, each key once (the first), as the run's output holds them."""
    seen: set[str] = set()
    unique = []
    for record in records:
        if record.identity not in seen:
            seen.add(record.identity)
            unique.append(record)
    return unique


def _classify(records: list[Record], prior: Prior | None) -> tuple[RecordCounts, list[Record]]:
    """New, changed and unchanged against the catalog run's digests of this page; the new and changed."""
    before = unpack_digests(prior.digests) if prior is not None else {}
    new = changed = 0
    upserts: list[Record] = []
    for record in records:
        old = before.get(digest(record.identity))
        if old is None:
            new += 1
            upserts.append(record)
        elif old != digest(record.content_hash):
            changed += 1
            upserts.append(record)
    return RecordCounts(new, changed, len(records) - new - changed), upserts


def extract_again(
    spec: CrawlSpec, task: UrlTask, prior: Prior | None, outcome: Fetched
) -> tuple[PageResult, list[Record], list[Record]]:
    """A page's result, records and new or changed records from a response already had (``sluice reextract``),
    as a fetch makes them. Never carried (the records are extracted whatever the body's hash), and its links
    are not followed."""
    # Its fetch time is the run's (the caller keeps the result's own): a re-extraction fetches nothing.
    visit = _fetched(
        spec, task, replace(prior, carried=False) if prior is not None else None, outcome, int(time.time())
    )
    return visit.result, visit.records, visit.upserts


def records_part(key: str) -> RecordsPart:
    """An empty part at ``key``: pages' records added as blocks (what a batch writes, and a re-extraction)."""
    return _Part(key)


RecordsPart = _Part


def by_host_in_turn(items: list[_Item]) -> list[_Item]:
    """``items`` one host at a time in turn (each host's in their own order): the order a batch's URLs take the
    spec's concurrency slots in, so that no host's URLs hold slots while they wait on its cap."""
    by_host: dict[str, list[_Item]] = {}
    for item in items:
        by_host.setdefault(host_key(item[2].url), []).append(item)
    if len(by_host) < 2:
        return items
    return [item for row in zip_longest(*by_host.values()) for item in row if item is not None]

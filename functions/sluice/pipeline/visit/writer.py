"""How a batch's visits are written: in an order that makes a crash at any line harmless, in one or two chunks.

Per chunk (:class:`ChunkWriter`): one part object with the chunk's fetched pages' records, one claim per
new link and one send for them, one conditional write per URL that counts it (its
:class:`~sluice.domain.pages.PageResult`), one progress report. Every step is safe to repeat and the
order makes a crash at any line harmless:

0. with ``output.archive``, the batch's responses (a WARC file, :mod:`sluice.pipeline.visit.archive`) are
   written before the part and any result (a crash leaves an unreferenced file);
1. the part is written before any result points at it (a crash leaves an unreferenced part);
2. links are claimed and sent before the page that found them is counted (a redelivered page
   sends again the links it claimed and that still wait);
3. the records table (if the spec asks for it) is upserted, each key once;
4. a URL's result is written only if none is there yet: redeliveries, regrouped batches and
   concurrent duplicates count it once, and their parts are never read;
5. the progress report comes last: it is a hint for the drain trigger, never a count.

A batch's writes while its fetching goes on (:class:`ChunkedWrites`): early chunks, written in a
thread, then the rest. Fetching a batch then writing it leaves the batch's hosts idle while it writes:
one host's batches follow one another (the queue gives a host to one fetcher at a time), so on a
single host the write is time nobody fetches. :class:`ChunkedWrites` starts writing the pages already
visited once a chunk's worth of the batch's URLs are done (:func:`early_chunk`: half of a batch, at most
100 pages unless that makes more than eight chunks), in a thread, while the rest is still fetched, and
the next chunk as soon as that one is written and enough pages wait; when the batch's fetching ends only
the last chunk is left.

Each chunk is written exactly as a whole batch is, so a crash between the chunks leaves the first
chunk's pages counted and the second's not: the batch's messages come back (they are deleted only
after :meth:`ChunkedWrites.finish`), and the redelivery skips the pages the first chunk counted.
Writes never overlap one another: at most one chunk is in a thread at a time.

Each chunk is one more part object and one more progress report than a batch written whole. A second
PUT a batch is about 6% of a demo run's cost on AWS (``make cost``), for about 3% of an invocation's
time, so the stack leaves it off (``Tuning.early_write_urls`` 0) and the local runner, whose parts are
files and whose batches are up to 1,000 URLs, turns it on. Each chunk reports its own progress: a
worker dying between the chunks must not leave the first chunk's pages out of the drain trigger's sum.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from sluice.domain.layout import part_key
from sluice.domain.pages import PageResult
from sluice.domain.runs import Progress, RunState, drained
from sluice.domain.seedset import SeedSet
from sluice.observability import logger
from sluice.pipeline.services import Services
from sluice.pipeline.visit.container import Container
from sluice.pipeline.visit.links import ClaimCache, claim_links, parent_id, unknown_beyond_depth
from sluice.pipeline.visit.page_results import RecordsPart, Visit
from sluice.ports import Claims
from sluice.spec import CrawlSpec

if TYPE_CHECKING:
    from sluice.pipeline.visit.archive import BatchArchive

T = TypeVar("T")
R = TypeVar("R")

RECHECK_S = 60.0
"""After the finalizer found a run not drained, fetchers wait this long before asking again."""


class ChunkedWrites(Generic[T, R]):
    """Collects a batch's visits as they end; writes them ``early`` at a time or more while the rest are fetched.

    ``write`` is called with a list of visits, in a thread, never twice at once; ``early`` 0 writes the
    whole batch at :meth:`finish` (as before: e.g. a batch too small to be worth two parts).
    """

    def __init__(self, write: Callable[[list[T]], R], early: int) -> None:
        self._write = write
        self._early = early
        self._pending: list[T] = []
        self._running: asyncio.Future[R] | None = None
        self._answers: list[R] = []
        self.chunks = 0

    def add(self, visit: T) -> None:
        """A visit that ended (called on the event loop); starts an early chunk once enough wait."""
        self._pending.append(visit)
        self._next_chunk()

    def _next_chunk(self) -> None:
        """Start writing what waits, if it is a chunk's worth and no chunk is being written (nor failed)."""
        if not self._early or len(self._pending) < self._early:
            return
        if self._running is not None:
            if not self._running.done() or self._running.exception() is not None:
                return  # a failed chunk fails the batch at finish(): nothing more is written
            self._answers.append(self._running.result())
        chunk, self._pending = self._pending, []
        self.chunks += 1
        self._running = asyncio.ensure_future(asyncio.to_thread(self._write, chunk))
        self._running.add_done_callback(lambda _: self._next_chunk())

    async def finish(self) -> list[R]:
        """Wait for the early chunks, then write what is left; the chunks' answers in order.

        An early chunk that failed raises here, after the batch's fetching ended (the batch fails as a
        whole batch whose write failed does: its messages come back, and its counted pages are skipped)."""
        answers = self._answers
        while self._running is not None:
            running = self._running
            result = await running
            if self._running is running:  # its callback started no other chunk
                answers.append(result)
                self._running = None
        if self._pending or not answers:
            chunk, self._pending = self._pending, []
            self.chunks += 1
            answers.append(await asyncio.to_thread(self._write, chunk))
        return answers

    async def settle(self) -> None:
        """Wait for an early chunk still being written, whatever it ends in, and start no other (a batch that
        fails on another step must not leave a write running in a thread while its messages go back)."""
        self._early = 0
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)
            self._running = None


EARLY_CHUNK_URLS = 100
EARLY_CHUNKS = 8
"""A batch's chunks: half the batch, at most :data:`EARLY_CHUNK_URLS` pages, but no more than
:data:`EARLY_CHUNKS` chunks (a local batch of 1,000 URLs: eight of 125, the last written once fetched)."""


def early_chunk(urls: int, archive: BatchArchive | None, min_urls: int) -> int:
    """After how many visited pages a batch of ``urls`` starts writing a chunk (0: once fetched), for
    ``Tuning.early_write_urls`` ``min_urls`` (0: off; a smaller batch is written whole). With
    ``output.archive`` the batch is written whole: the archive's file is added to on the loop while a
    chunk would flush it."""
    if archive is not None or min_urls <= 0 or urls < min_urls:
        return 0
    return max(min((urls + 1) // 2, EARLY_CHUNK_URLS), -(-urls // EARLY_CHUNKS))


@dataclass
class ChunkWriter:
    """Writes a chunk of one run's batch (what :class:`ChunkedWrites` calls), in the order of the module doc."""

    services: Services
    container: Container
    run: RunState
    spec: CrawlSpec
    archive: BatchArchive | None
    log: dict[str, str]

    def __call__(self, visits: list[Visit]) -> Progress:
        """A chunk of the batch's writes, in the order that makes a crash anywhere harmless; what it counted."""
        services, crawl, run_id = self.services, self.run.crawl, self.run.run_id
        if self.archive is not None:
            self.archive.flush(services.objects)  # before the part and every result that refers to it
        part = RecordsPart(part_key(crawl, run_id, uuid.uuid4().hex))
        results = [part.add(v) for v in visits]
        if part.body:
            services.objects.put(part.key, bytes(part.body), "application/x-ndjson")
        found = [v.links for v in visits if v.links]
        claimed = 0
        if found or any(v.beyond_depth for v in visits):
            seeds = self.container.seed_set(services, crawl, run_id)
            cache = self.container.claim_cache(run_id)
            claims = claim_links(services, self.run, self.spec, found, seeds, cache) if found else Claims()
            claimed = len(claims.won)
            results = with_limits(results, visits, claims, seeds, cache)
        if services.records is not None and self.spec.output.records_table:
            # Before counting, so that a batch that dies after counting has already upserted (upserts are
            # idempotent); each key once, as one BatchWriteItem must name an item once.
            upserts = list({rec.identity: rec for v in visits for rec in v.upserts}.values())
            if upserts:
                services.records.upsert(crawl, run_id, upserts)
        counted = services.frontier.complete(run_id, results) if results else []
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
            services.frontier.add_progress(run_id, progress)
        if won:
            self._finalize_if_drained()
        return progress

    def _finalize_if_drained(self) -> None:
        """Ask the finalizer when the run looks drained (at most once a :data:`RECHECK_S` after it said no)."""
        services, crawl, run_id = self.services, self.run.crawl, self.run.run_id
        run = services.ledger.get_run(crawl, run_id)
        if run is None or run.checked_within(RECHECK_S, services.clock.now()):
            return
        if drained(run, lambda: services.frontier.progress(run_id)):
            logger.info("run looks drained: asking the finalizer", extra=self.log)
            services.finalize_later({"crawl": crawl, "run_id": run_id})


def with_limits(
    results: list[PageResult], visits: list[Visit], claims: Claims, seeds: SeedSet, cache: ClaimCache
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

"""The crawl engine: a spec and seed URLs in, records and a tally out, with no AWS in sight.

A bounded pool of workers pulls URLs from an in-memory frontier, fetches each through
:class:`~sluice.fetch.client.PageFetcher` (which owns concurrency, politeness and retries),
extracts records and links, streams records to a sink per page, and feeds new in-scope
links back, deduplicated by canonical URL, within ``follow.max_depth`` and ``follow.max_pages``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sluice.extraction.charset import parser_input
from sluice.extraction.extract import PageExtraction, Record, extract_page
from sluice.extraction.limits import PageTooComplex
from sluice.extraction.urls import canonicalize_url
from sluice.fetch.client import PageFetcher
from sluice.fetch.outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
from sluice.pipeline.visit.links import CarriedData, carried_data, with_carried
from sluice.spec import CrawlSpec
from sluice_tools.runner.secrets import local_credentials


class RecordSink(Protocol):
    """Where a page's records go, as soon as the page is extracted."""

    def write(self, records: Sequence[Record]) -> None: ...


class ValidatorStore(Protocol):
    """Validators (ETag, Last-Modified) remembered from earlier runs, by canonical URL."""

    def get(self, url: str) -> Validators | None: ...

    def put(self, url: str, validators: Validators) -> None: ...


@dataclass
class CrawlTally:
    """What a crawl did, counted as it went."""

    fetched: int = 0
    not_modified: int = 0
    failed: int = 0
    skipped: int = 0
    records: int = 0
    items: int = 0
    bytes: int = 0
    fallback_keys: int = 0
    capped_links: int = 0
    """New links left out because ``follow.max_pages`` URLs were queued."""
    beyond_depth: int = 0
    """Links of pages at ``follow.max_depth`` the crawl never queued."""
    links_dropped: int = 0
    """Links longer than a run visits, left out by extraction (as the pipeline leaves them out)."""
    rejected: Counter[str] = field(default_factory=Counter)
    missing: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    skips: Counter[str] = field(default_factory=Counter)
    by_type: Counter[str] = field(default_factory=Counter)
    """Records per page type (a spec with ``types``)."""

    @property
    def pages_done(self) -> int:
        return self.fetched + self.not_modified + self.failed + self.skipped

    def null_rates(self) -> dict[str, float]:
        """Per field, the share of items where it was missing."""
        return {name: count / self.items for name, count in sorted(self.missing.items())} if self.items else {}

    def count(self, outcome: FetchOutcome) -> None:
        match outcome:
            case Fetched():
                self.fetched += 1
                self.bytes += len(outcome.body)
            case NotModified():
                self.not_modified += 1
            case Failed():
                self.failed += 1
                self.failures[outcome.reason] += 1
            case Skipped():
                self.skipped += 1
                self.skips[outcome.reason] += 1

    def add(self, extraction: PageExtraction) -> None:
        self.records += len(extraction.records)
        if extraction.type is not None:
            self.by_type[extraction.type] += len(extraction.records)
        self.fallback_keys += extraction.fallback_keys
        self.links_dropped += extraction.links_dropped
        self.items += extraction.items
        self.rejected.update(extraction.rejected)
        self.missing.update(extraction.missing)


Progress = Callable[[CrawlTally, int], None]


@dataclass(frozen=True, slots=True)
class _Task:
    url: str
    depth: int
    via: str | None = None
    """The page type's follow rule whose link this is (a spec with ``types``)."""
    carry: CarriedData | None = None
    """Fields the linking page carried here, merged into the page's records."""


class Frontier:
    """URLs waiting to be fetched: each canonical URL admitted once, at most ``max_pages`` in all."""

    def __init__(self, max_pages: int) -> None:
        self._queue: asyncio.Queue[_Task] = asyncio.Queue()
        self._seen: set[str] = set()
        self._max_pages = max_pages
        self.capped: set[str] = set()
        """New URLs left out because ``max_pages`` were queued."""
        self.beyond_depth: set[str] = set()
        """Unknown links of pages at ``max_depth``, not followed."""

    def admit(self, url: str, depth: int, via: str | None = None, carry: CarriedData | None = None) -> bool:
        """Queue ``url`` unless it was queued before; False for a new URL over ``max_pages`` (it is left out)."""
        canonical = canonicalize_url(url)
        if canonical in self._seen:
            return True
        if len(self._seen) >= self._max_pages:
            self.capped.add(canonical)
            return False
        self._seen.add(canonical)
        self._queue.put_nowait(_Task(canonical, depth, via, carry))
        return True

    def known(self, url: str) -> bool:
        return url in self._seen

    @property
    def admitted(self) -> int:
        return len(self._seen)

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def next(self) -> _Task:
        return await self._queue.get()

    def done(self) -> None:
        self._queue.task_done()

    async def drained(self) -> None:
        await self._queue.join()


class Crawl:
    """One crawl of one spec; :meth:`run` returns the tally when the frontier is empty."""

    def __init__(
        self,
        spec: CrawlSpec,
        sink: RecordSink,
        *,
        fetcher: PageFetcher,
        validators: ValidatorStore | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.tally = CrawlTally()
        self._sink = sink
        self._fetcher = fetcher
        self._validators = validators
        self._progress = progress
        self._frontier = Frontier(spec.follow.max_pages)

    async def run(self, seeds: Iterable[str] | None = None) -> CrawlTally:
        for url in self.spec.seeds.iter_urls() if seeds is None else seeds:
            self._frontier.admit(url, 0)
        workers = [asyncio.create_task(self._work()) for _ in range(self.spec.politeness.concurrency)]
        try:
            await self._frontier.drained()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        frontier = self._frontier
        self.tally.capped_links = len(frontier.capped)
        self.tally.beyond_depth = sum(1 for url in frontier.beyond_depth if not frontier.known(url))
        return self.tally

    async def _work(self) -> None:
        while True:
            task = await self._frontier.next()
            try:
                await self._visit(task)
            finally:
                self._frontier.done()
                if self._progress is not None:
                    self._progress(self.tally, self._frontier.pending)

    async def _visit(self, task: _Task) -> None:
        known = self._validators.get(task.url) if self._validators is not None else None
        outcome = await self._fetcher.fetch(task.url, known)
        self.tally.count(outcome)
        if self._validators is not None and isinstance(outcome, Fetched | NotModified):
            self._validators.put(task.url, outcome.validators)
        if not isinstance(outcome, Fetched):
            return
        # UTF-8 pages go to lexbor as bytes: no decode to text and re-encode on the way in.
        try:
            extraction = extract_page(
                self.spec, outcome.final_url, parser_input(outcome.body, outcome.content_type), task.via
            )
        except PageTooComplex as exc:
            self.tally.fetched -= 1
            self.tally.count(Failed(task.url, str(exc), False, outcome.status, None, outcome.attempts))
            return
        records = with_carried(extraction.records, task.carry)
        if records:
            self._sink.write(records)
        self.tally.add(extraction)
        if task.depth < self.spec.follow.depth_limit:
            # A spec with types: each link keeps the rule that found it (its type) and what it carries.
            rules = extraction.rules or {}
            carried = carried_data(self.spec, extraction, records)[0] if rules else {}
            for link in extraction.links:
                self._frontier.admit(link, task.depth + 1, rules.get(link), carried.get(link))
        else:
            self._frontier.beyond_depth.update(link for link in extraction.links if not self._frontier.known(link))


async def crawl(
    spec: CrawlSpec,
    sink: RecordSink,
    *,
    allow_loopback: bool = False,
    validators: ValidatorStore | None = None,
    progress: Progress | None = None,
) -> CrawlTally:
    """Crawl ``spec`` from its seeds with a fresh fetcher, closing it afterwards.

    The spec's request section is resolved from the environment first (``SLUICE_SECRET_<NAME>``)."""
    credentials = local_credentials(spec)
    async with PageFetcher(spec.politeness, allow_loopback=allow_loopback, credentials=credentials) as fetcher:
        return await Crawl(spec, sink, fetcher=fetcher, validators=validators, progress=progress).run()

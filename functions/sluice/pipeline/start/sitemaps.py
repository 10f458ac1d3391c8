"""Read a run's sitemaps at its start: the listed ones, those robots.txt names, indexes followed, each bounded.

The scheduler reads them once per run, with the fetch layer's own client (the address guard on
every hop, robots.txt, retries, the body cap, gzip decoded under the same cap, and what the spec's
``request`` section adds: its headers, its credentials to the spec's origins, its proxy) and the run's
shared robots.txt store, so a site sees its robots.txt asked once for the whole run. Level by
level from the listed sitemaps (depth 0), at most :data:`READERS` at a time: an index's
sitemaps are one hop deeper. Every bound refuses what it stops, by name, and takes nothing else
away: ``max_sitemaps`` documents, ``max_bytes`` a document once decompressed, ``max_depth`` hops,
``max_urls`` pages, and :data:`READ_BUDGET_S` of the start's time. A sitemap that is no sitemap
(malformed XML, a DTD, an HTML page) is refused with the parser's words; the pages listed before
the fault are kept. Pages out of the crawl's scope, or that no run can carry, are counted, not seeded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace

from sluice.domain.pages import url_hash, url_number
from sluice.domain.secrets import SecretUnavailable
from sluice.domain.seedset import SeedSet
from sluice.extraction.sitemaps import SitemapError, SitemapParser, lastmod_epoch
from sluice.extraction.urls import Scope, canonicalize_url, resolve_link
from sluice.fetch.body import decode_capped
from sluice.fetch.client import PageFetcher
from sluice.fetch.credentials import RequestCredentials
from sluice.fetch.errors import DeferredFetchError, PermanentFetchError
from sluice.fetch.outcomes import Failed, Fetched, NotModified, Skipped
from sluice.fetch.robots import robots_url
from sluice.observability import logger
from sluice.pipeline.credentials import request_credentials
from sluice.pipeline.robots import SharedRobots
from sluice.pipeline.services import Services
from sluice.pipeline.start.sitemapseeds import SitemapReport, SitemapSeedWriter
from sluice.spec import MAX_SEED_URLS, CrawlSpec, Politeness, Sitemaps, check_seed_url

READERS = 4
"""Sitemaps read at once: each can hold ``max_bytes`` about three times while it is decoded (4 x 150 MB at
the 50 MiB default, inside the scheduler's 1,024 MB)."""
READ_BUDGET_S = 300.0
"""The start's time for sitemaps, at most (and at most half of what the invocation has left)."""
RETRY_SLEEP_CAP_S = 5.0
_GZIP_MAGIC = b"\x1f\x8b"


def sitemap_politeness(politeness: Politeness, sitemaps: Sitemaps) -> Politeness:
    """The spec's politeness for reading sitemaps: their own cap, any media type (the parser judges), no markers."""
    breaker = politeness.breaker.model_copy(update={"markers": []})
    return politeness.model_copy(
        update={"max_body_bytes": sitemaps.max_bytes, "content_types": ["*/*"], "breaker": breaker}
    )


def read_run_sitemaps(
    services: Services, spec: CrawlSpec, run_id: str, own: SeedSet, time_left: Callable[[], float]
) -> None:
    """Read the spec's sitemaps for run ``run_id``; store what they list (``sluice.pipeline.start.sitemapseeds``)."""
    if spec.seeds.sitemaps is None:
        return
    budget = min(READ_BUDGET_S, max(0.0, time_left()) / 2)
    asyncio.run(_read(services, spec, spec.seeds.sitemaps, run_id, own, budget))


async def _read(
    services: Services, spec: CrawlSpec, sitemaps: Sitemaps, run_id: str, own: SeedSet, budget_s: float
) -> None:
    credentials, unavailable = _credentials(services, spec)
    writer = SitemapSeedWriter(services.objects, spec.name, run_id)
    fetcher = PageFetcher(
        sitemap_politeness(spec.politeness, sitemaps),
        allow_loopback=services.tuning.allow_loopback,
        robots_store=SharedRobots(services.objects, spec.name, run_id, clock=services.clock),
        credentials=credentials,
        clock=services.clock,
    )
    try:
        async with fetcher:
            reading = _Reading(spec, run_id, sitemaps, fetcher, writer, own, time.monotonic() + budget_s)
            if unavailable is None:
                await reading.run()
            else:  # what the spec's requests need is missing: no sitemap is asked without it
                reading.refuse_all(f"not read: {unavailable}")
        writer.commit(reading.report)
    except BaseException:
        writer.abort()
        raise
    log = {
        "crawl": spec.name,
        "run_id": run_id,
        **{k: v for k, v in reading.report.as_dict().items() if k != "refused"},
    }
    logger.info("sitemaps read", extra=log)


def _credentials(services: Services, spec: CrawlSpec) -> tuple[RequestCredentials | None, SecretUnavailable | None]:
    """What the sitemaps' requests carry, as the pages' do; or the secret that is missing for good.

    A secret the store may yet give (throttling, a timeout) is raised: the start's retry resumes its run."""
    if not spec.request.configured:
        return None, None
    try:
        return request_credentials(spec, services.secrets), None
    except SecretUnavailable as exc:
        if exc.retryable:
            raise
        return None, exc


@dataclass(frozen=True, slots=True)
class _Document:
    url: str
    depth: int
    named: bool = False
    """Named by an index or a robots.txt (not listed in the spec): read only on the crawl's hosts."""


class _Reading:
    """One run's reading: the documents level by level, the pages they list written as they are parsed."""

    def __init__(
        self,
        spec: CrawlSpec,
        run_id: str,
        sitemaps: Sitemaps,
        fetcher: PageFetcher,
        writer: SitemapSeedWriter,
        own: SeedSet,
        deadline: float,
    ) -> None:
        self.spec, self.sitemaps, self.fetcher, self.writer, self.own = spec, sitemaps, fetcher, writer, own
        self.deadline = deadline
        self.log = {"crawl": spec.name, "run_id": run_id}
        self.scope = Scope.from_spec(spec)
        self.hosts = replace(self.scope, allow=(), deny=())
        """The crawl's hosts, without its link patterns: where a sitemap an index names may be read."""
        self.report = SitemapReport()
        self.room = min(sitemaps.max_urls or MAX_SEED_URLS, max(0, spec.follow.max_pages - len(own)))
        """New seeds the sitemaps may add: ``max_urls``, and what ``follow.max_pages`` leaves after the spec's own."""
        self.taken = 0
        self.gate = asyncio.Semaphore(READERS)
        self.pages: set[int] = set()
        self.documents: set[str] = set()

    async def run(self) -> None:
        level = self._new([_Document(_child(u, u) or u, 0) for u in self.sitemaps.urls])
        if self.sitemaps.from_robots:
            level += self._new(await self._from_robots())
        while level:
            room = max(0, self.sitemaps.max_sitemaps - self.report.documents)
            for document in level[room:]:
                self._refuse(document.url, f"over max_sitemaps ({self.sitemaps.max_sitemaps}): not read")
            level = level[:room]
            self.report.documents += len(level)
            answers = await asyncio.gather(*(self._fetch(d.url) for d in level))
            children: list[_Document] = []
            for document, answer in zip(level, answers, strict=True):
                if isinstance(answer, str):
                    self._refuse(document.url, answer)
                else:
                    children += self._parse(document, *answer)
            level = self._new(children)

    def refuse_all(self, reason: str) -> None:
        """Refuse every listed sitemap and every robots.txt ``from_robots`` would read, for one reason."""
        robots = [robots_url(site) for site in self.spec.seeds.robots_sites()] if self.sitemaps.from_robots else []
        for url in [*self.sitemaps.urls, *robots]:
            self._refuse(url, reason)

    def _new(self, documents: list[_Document]) -> list[_Document]:
        """Documents not met before (an index may list one twice, or itself), within ``max_depth``."""
        fresh = []
        for document in documents:
            if document.url in self.documents:
                continue
            self.documents.add(document.url)
            if document.named and not self.hosts.allows(document.url):
                self.report.sitemaps_out_of_scope += 1
                self._refuse(document.url, "on a host out of the crawl's scope: not read (its pages would not be)")
            elif document.depth > self.sitemaps.max_depth:
                self._refuse(
                    document.url, f"nested deeper than max_depth ({self.sitemaps.max_depth} index hops): not read"
                )
            else:
                fresh.append(document)
        return fresh

    async def _from_robots(self) -> list[_Document]:
        found = []
        for site in self.spec.seeds.robots_sites():
            robots = robots_url(site)
            self.report.robots += 1
            try:
                lines = await asyncio.wait_for(self.fetcher.robots.sitemaps(robots), self._left())
            except DeferredFetchError as exc:
                self._refuse(robots, f"robots.txt not read: {exc.reason}")
                continue
            except TimeoutError:
                self._refuse(robots, "robots.txt not read: the start's time for sitemaps ran out")
                continue
            named = [u for line in lines if (u := _child(line, robots)) is not None]
            if not named:
                self._refuse(robots, "robots.txt names no sitemap (no Sitemap: line)")
            found += [_Document(u, 0, named=True) for u in named]
        return found

    def _refuse(self, url: str, reason: str) -> None:
        self.report.refuse(url, reason)
        logger.warning("sitemap refused", extra={**self.log, "sitemap": url, "reason": reason})

    def _left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    async def _fetch(self, url: str) -> tuple[bytes, str] | str:
        """The sitemap's XML and final URL, or why there is none (at most :data:`READERS` at a time)."""
        async with self.gate:
            return await self._fetch_one(url)

    async def _fetch_one(self, url: str) -> tuple[bytes, str] | str:
        if self._left() <= 0:
            return "not read: the start's time for sitemaps ran out"
        cap = self.sitemaps.max_bytes
        try:
            outcome = await asyncio.wait_for(self.fetcher.fetch(url, retry_sleep_cap=RETRY_SLEEP_CAP_S), self._left())
        except TimeoutError:
            return "not read: the start's time for sitemaps ran out"
        match outcome:
            case Failed(reason=reason) | Skipped(reason=reason):
                return f"larger than max_bytes ({cap} bytes)" if reason.startswith("body over") else reason
            case NotModified():
                return "http 304 to a request that asked for the whole sitemap"
            case Fetched():
                pass
        body = outcome.body
        if body.startswith(_GZIP_MAGIC):  # a .xml.gz file (not a content coding: the fetch layer decoded that)
            try:
                body = await decode_capped(_once(body), "gzip", cap)
            except PermanentFetchError as exc:
                over = exc.reason.startswith("body over")
                return f"larger than max_bytes ({cap} bytes) once decompressed" if over else "not valid gzip"
        return body, outcome.final_url

    def _parse(self, document: _Document, body: bytes, final_url: str) -> list[_Document]:
        """Take the pages a sitemap lists; the sitemaps an index lists, one hop deeper."""
        parser = SitemapParser()
        children: list[_Document] = []
        entries = 0
        try:
            for entry in parser.entries(body):
                entries += 1
                if parser.kind == "sitemapindex":
                    child = _child(entry.loc, final_url)
                    if child is None:
                        self._refuse(entry.loc, f"not a sitemap URL a run can read (listed by {document.url})")
                    else:
                        children.append(_Document(child, document.depth + 1, named=True))
                else:
                    self._page(entry.loc, entry.lastmod, final_url)
        except SitemapError as exc:
            kept = f" ({entries} entries before it taken)" if entries else ""
            self._refuse(document.url, f"malformed: {exc}{kept}")
        return children

    def _page(self, loc: str, lastmod: str | None, base: str) -> None:
        report = self.report
        url = _child(loc, base)
        if url is None:
            report.invalid += 1
            return
        if not self.scope.allows(url):
            report.out_of_scope += 1
            return
        number = url_number(url_hash(url))
        if number in self.pages:
            report.duplicates += 1
            return
        if not self.own.has_number(number):  # the spec's own seeds are seeds already: only their lastmod counts
            if self.taken >= self.room:
                report.left_out += 1
                return
            self.taken += 1
        self.pages.add(number)
        stamp = lastmod_epoch(lastmod)
        report.urls += 1
        report.with_lastmod += stamp is not None
        self.writer.add(url, stamp)


def _child(loc: str, base: str) -> str | None:
    """A listed page's or sitemap's canonical URL (resolved against where it is listed), or None if no run
    could fetch it: not http(s), credentials, longer than a URL a run takes."""
    resolved = resolve_link(loc, base)
    try:
        return canonicalize_url(check_seed_url(resolved)) if resolved is not None else None
    except ValueError:
        return None


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body

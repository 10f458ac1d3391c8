"""A run's sitemap seeds as its start stored them: page URLs with their lastmod, and what reading found.

Reading sitemaps asks sites for them, so it happens once per run (:mod:`sluice.pipeline.start.sitemaps`).
What it found is stored under the run's work prefix, one ``URL<TAB>LASTMOD`` line a page, and
everything after reads that: a fan-out continued in a fresh invocation, or a retried start, plans
exactly the stream the first one planned. The lines object is committed last (after the report),
so its presence says the reading finished.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sluice.domain.layout import sitemap_report_key, sitemap_seeds_key
from sluice.domain.pages import MAX_REASON, MAX_URL, url_hash, url_number
from sluice.pipeline.start.seedfile import object_lines
from sluice.ports import ObjectStore, ObjectWriter

MAX_LISTED = 20
"""Refusals a report names (the rest are counted)."""


@dataclass
class SitemapReport:
    """What reading a run's sitemaps found: the summary's ``sitemaps`` section."""

    documents: int = 0
    """Sitemaps and indexes read."""
    robots: int = 0
    """robots.txt files read for their ``Sitemap:`` lines (``from_robots``)."""
    urls: int = 0
    """Distinct page URLs taken (seeds of the run, or the spec's own seeds given a lastmod)."""
    with_lastmod: int = 0
    invalid: int = 0
    """Locations no run can carry (not http(s), credentials, too long)."""
    out_of_scope: int = 0
    sitemaps_out_of_scope: int = 0
    """Sitemaps an index or a robots.txt named on a host out of the crawl's scope: not fetched (nor their
    robots.txt), as their pages would not be crawled."""
    duplicates: int = 0
    left_out: int = 0
    """Page URLs past ``max_urls`` (or the room ``follow.max_pages`` leaves): not seeded."""
    refused: list[dict[str, str]] = field(default_factory=list)
    """The first :data:`MAX_LISTED` sitemaps (or robots.txt files) not read or not whole, each with why."""
    refused_count: int = 0

    def refuse(self, url: str, reason: str) -> None:
        self.refused_count += 1
        if len(self.refused) < MAX_LISTED:
            self.refused.append({"url": url[:MAX_URL], "reason": reason[:MAX_REASON]})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SitemapSeedWriter:
    """Where the reader puts what it takes: lines streamed to the object, committed by :meth:`commit`."""

    def __init__(self, objects: ObjectStore, crawl: str, run_id: str) -> None:
        self.objects, self.crawl, self.run_id = objects, crawl, run_id
        self._writer: ObjectWriter = objects.writer(sitemap_seeds_key(crawl, run_id), "text/tab-separated-values")

    def add(self, url: str, lastmod: int | None) -> None:
        self._writer.write(f"{url}\t{'' if lastmod is None else lastmod}\n".encode())

    def commit(self, report: SitemapReport) -> None:
        """The report, then the lines: the lines' presence says the reading finished."""
        body = json.dumps(report.as_dict(), sort_keys=True).encode()
        self.objects.put(sitemap_report_key(self.crawl, self.run_id), body, "application/json")
        self._writer.close()

    def abort(self) -> None:
        self._writer.abort()


class SitemapSeeds:
    """A run's stored sitemap pages: streamed for the plan, their lastmods held to stamp each task.

    The lastmods take about 100 bytes a page that has one (a million: ~100 MB of the scheduler's 1 GB).
    """

    def __init__(self, objects: ObjectStore, key: str, lastmods: dict[int, int], count: int) -> None:
        self.objects, self.key, self._lastmods, self.count = objects, key, lastmods, count

    @classmethod
    def load(cls, objects: ObjectStore, crawl: str, run_id: str) -> SitemapSeeds | None:
        """The run's stored sitemap seeds, or None if its start has not finished reading them."""
        key = sitemap_seeds_key(crawl, run_id)
        if objects.size(key) is None:
            return None
        seeds = cls(objects, key, {}, 0)
        for url, lastmod in seeds.entries():
            seeds.count += 1
            if lastmod is not None:
                seeds._lastmods[url_number(url_hash(url))] = lastmod
        return seeds

    def entries(self) -> Iterator[tuple[str, int | None]]:
        for line in object_lines(self.objects, self.key):
            url, _, lastmod = line.partition("\t")
            if url:
                yield url, int(lastmod) if lastmod else None

    def urls(self) -> Iterator[str]:
        """The page URLs in the order reading found them (the same order every time)."""
        return (url for url, _ in self.entries())

    def lastmod(self, number: int) -> int | None:
        """The lastmod a sitemap gave the page whose URL number is ``number``, if any."""
        return self._lastmods.get(number)


def load_report(objects: ObjectStore, crawl: str, run_id: str) -> dict[str, Any] | None:
    """What reading the run's sitemaps found, as stored; None if it never finished."""
    raw = objects.get(sitemap_report_key(crawl, run_id))
    if raw is None:
        return None
    report: dict[str, Any] = json.loads(raw)
    return report

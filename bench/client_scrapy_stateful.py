"""Scrapy as the stateful recipe: client_scrapy's spider, plus JOBDIR and a SQLite upsert pipeline.

JOBDIR (Scrapy's disk request queue and persisted dupefilter, so a crawl can be stopped and resumed)
lives in a fresh temporary folder per run, beside ``items.sqlite``; the folder is removed afterwards.
The pipeline upserts each item by url and commits per item, as the docs' pipeline examples write each
item in ``process_item`` (``--variant per-item``), or every 100 items and at close (``--variant
batched``, the default: what a user who measured would write, and the stronger peer).
Only the first crawl is timed; ``--resume-check`` then crawls again, untimed,
to show the state is real: re-running the finished job fetches nothing, and a job stopped halfway and
resumed fetches each page once, with the row count unchanged throughout.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.exceptions import DropItem
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.python.failure import Failure

from bench.client_scrapy import BooksSpider, Tally
from bench.common import ClientResult, client_args, listing_urls, peak_rss_mb, pin_to_core

VARIANTS = ("batched", "per-item")
COMMIT_EVERY = {"batched": 100, "per-item": 1}
UPSERT = (
    "INSERT INTO books (url, title, price, rating) VALUES (:url, :title, :price, :rating) "
    "ON CONFLICT(url) DO UPDATE SET title = excluded.title, price = excluded.price, rating = excluded.rating"
)


class SqliteUpsertPipeline:
    """Writes every item to SQLite keyed by url; a re-crawled item updates its row instead of adding one."""

    def __init__(self, path: str, commit_every: int) -> None:
        self.path = path
        self.commit_every = max(1, commit_every)
        self.pending = 0
        self.db: sqlite3.Connection | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SqliteUpsertPipeline:
        return cls(crawler.settings.get("SQLITE_PATH"), crawler.settings.getint("SQLITE_COMMIT_EVERY", 1))

    def open_spider(self) -> None:
        self.db = sqlite3.connect(self.path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS books (url TEXT PRIMARY KEY NOT NULL, title TEXT, price REAL, rating TEXT)"
        )
        self.db.commit()

    def close_spider(self) -> None:
        if self.db is not None:
            self.db.commit()
            self.db.close()
            self.db = None

    def process_item(self, item: Any) -> Any:
        assert self.db is not None
        adapter = ItemAdapter(item)
        if not adapter.get("url"):
            raise DropItem("an item without a url has no key to upsert on")
        self.db.execute(UPSERT, {k: adapter.get(k) for k in ("url", "title", "price", "rating")})
        # Per item, as tutorials write it: an item is on disk once scraped, even if the process dies
        # before close_spider (its page is already in requests.seen, so never re-fetched). Batched,
        # a crash loses at most the last batch's items.
        self.pending += 1
        if self.pending >= self.commit_every:
            self.db.commit()
            self.pending = 0
        return item


def crawl_settings(concurrency: int, jobdir: Path, db: Path, commit_every: int = 1) -> dict[str, Any]:
    """client_scrapy's settings, plus the job directory and the pipeline that writes the database."""
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "HTTPCACHE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "JOBDIR": str(jobdir),
        "ITEM_PIPELINES": {SqliteUpsertPipeline: 300},
        "SQLITE_PATH": str(db),
        "SQLITE_COMMIT_EVERY": commit_every,
    }


def stateful_args() -> tuple[argparse.Namespace, bool]:
    """The client protocol's arguments plus ``--resume-check`` (taken off first: client_args parses strictly)."""
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--resume-check", action="store_true")
    extra, rest = own.parse_known_args()
    sys.argv[1:] = rest
    description = "Scrapy with JOBDIR and a SQLite upsert pipeline (--resume-check: also re-run and resume)"
    return client_args(description, VARIANTS), bool(extra.resume_check)


def row_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM books").fetchone()[0])


def size_on_disk(folder: Path) -> int:
    """Bytes of the files under ``folder`` (what a paused job leaves behind)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@dataclass
class Phase:
    """One crawl of the run: where its job lives, how it may stop early, and what it saw."""

    name: str
    jobdir: Path
    stop_after_pages: int = 0
    tally: Tally | None = None
    reason: str = ""
    filtered: int = 0
    rows: int = 0
    jobdir_bytes: int = 0
    rss_mb: float = 0.0

    @property
    def pages(self) -> int:
        return self.tally.ok if self.tally else 0


@inlineCallbacks
def run_phases(
    process: CrawlerProcess, phases: list[Phase], urls: list[str], db: Path
) -> Generator[Deferred[Any], Any, None]:
    """Crawl the phases one after another in one reactor, recording each one's state when it closes."""
    for phase in phases:
        crawler = process.create_crawler(BooksSpider)
        # Set the way `scrapy crawl -s JOBDIR=...` sets it, so each phase names its own job.
        overrides = {"JOBDIR": str(phase.jobdir), "CLOSESPIDER_PAGECOUNT": phase.stop_after_pages}
        crawler.settings.setdict(overrides, priority="cmdline")
        phase.tally = Tally()
        crawler.signals.connect(phase.tally.opened, signal=signals.spider_opened)
        crawler.signals.connect(phase.tally.closed, signal=signals.spider_closed)
        crawler.signals.connect(phase.tally.item, signal=signals.item_scraped)
        crawler.signals.connect(phase.tally.response, signal=signals.response_received)
        yield process.crawl(crawler, urls=urls)
        assert crawler.stats is not None
        phase.reason = str(crawler.stats.get_value("finish_reason", ""))
        phase.filtered = int(crawler.stats.get_value("dupefilter/filtered", 0))
        phase.rss_mb = peak_rss_mb()
        phase.rows = row_count(db)
        phase.jobdir_bytes = size_on_disk(phase.jobdir)
        if phase.reason == "shutdown":  # Ctrl-C or SIGTERM: the user stopped the run, not just this phase
            break


def crawl(process: CrawlerProcess, phases: list[Phase], urls: list[str], db: Path) -> None:
    """Run the phases, stop the reactor after the last, and raise what a phase raised."""
    failures: list[Failure] = []

    def stop(result: object) -> None:
        from twisted.internet import reactor  # installed by the first create_crawler

        if isinstance(result, Failure):
            failures.append(result)
        with contextlib.suppress(RuntimeError):  # already stopping (a signal came first), as Scrapy does
            reactor.stop()  # type: ignore[misc]  # twisted types the reactor module, not the installed reactor

    run_phases(process, phases, urls, db).addBoth(stop)
    process.start(stop_after_crawl=False)
    if failures:
        failures[0].raiseException()


def resume_phases(root: Path, timed: Phase, pages: int) -> list[Phase]:
    """Re-run the finished job as is, then a fresh job stopped halfway (like one Ctrl-C) and resumed."""
    halfway = root / "job-halfway"
    return [
        Phase("rerun", timed.jobdir),
        Phase("stopped", halfway, stop_after_pages=max(1, pages // 2)),
        Phase("resumed", halfway),
    ]


def verdict(phases: list[Phase], pages: int) -> tuple[bool, list[str]]:
    """Whether the later phases prove the state real, and what each saw, as notes."""
    timed, rerun, stopped, resumed = phases
    notes = [
        f"{p.name}: {p.pages} pages, reason {p.reason}, dupefilter filtered {p.filtered}, rows {p.rows}, "
        f"jobdir {p.jobdir_bytes} B"
        if p.tally
        else f"{p.name}: not run"
        for p in phases[1:]
    ]
    ok = (
        rerun.pages == 0
        and stopped.reason == "closespider_pagecount"
        and stopped.pages + resumed.pages == pages
        and all(p.rows == timed.rows for p in phases)
    )
    notes.append(f"resume-check {'passed' if ok else 'FAILED'}: stopped + resumed = {stopped.pages + resumed.pages}")
    return ok, notes


@dataclass
class StatefulResult(ClientResult):
    """ClientResult plus the state the run left: rows in SQLite and the job directory's bytes."""

    rows: int = 0
    jobdir_bytes: int = 0


def main() -> None:
    args, resume_check = stateful_args()
    pin_to_core(args.core)
    urls = listing_urls(args.base, args.pages)
    with tempfile.TemporaryDirectory(prefix="bench-scrapy-stateful-") as folder:
        root = Path(folder)
        db = root / "items.sqlite"
        timed = Phase("timed", root / "job")
        phases = [timed, *(resume_phases(root, timed, args.pages) if resume_check else [])]
        process = CrawlerProcess(crawl_settings(args.concurrency, timed.jobdir, db, COMMIT_EVERY[args.variant]))
        crawl(process, phases, urls, db)
        db_bytes = db.stat().st_size
    ok, notes = verdict(phases, args.pages) if resume_check else (True, [])
    assert timed.tally is not None
    watch = timed.tally.watch
    StatefulResult(
        "scrapy_stateful",
        args.concurrency,
        args.pages,
        timed.pages,
        args.pages - timed.pages,
        timed.tally.records,
        watch.wall_s,
        watch.cpu_s,
        timed.rss_mb,
        sample=timed.tally.sample,
        rss_before_mb=watch.rss_before_mb,
        system_s=watch.system_s,
        variant=args.variant + (" resume-check" if resume_check else ""),
        notes=[f"{args.variant} commits; sqlite {db_bytes} B", *notes],
        rows=timed.rows,
        jobdir_bytes=timed.jobdir_bytes,
    ).emit()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

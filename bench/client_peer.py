"""The best plain-Python peer: asyncio + aiohttp + selectolax (lexbor), written as a careful user would.

Variants: ``default`` (listing pages 1..P, the four fields of every card, as the engine's bench
spec) and ``docs`` (the link-heavy docs site from its index: every link of ``nav.docs-nav`` and
``main.docs-body`` extracted, resolved with ``urljoin``, canonicalized with w3lib's
``canonicalize_url``, kept in scope by the spec's allow and deny patterns and deduplicated, and
the four fields of every article, as crawls/demo-docs.yaml says). No shortcut the engine does
not take: the engine too resolves, canonicalizes and deduplicates every link of every page.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import Any
from urllib.parse import urljoin

import aiohttp
from selectolax.lexbor import LexborHTMLParser
from w3lib.url import canonicalize_url

from bench.common import (
    ClientResult,
    Stopwatch,
    client_args,
    complete,
    listing_urls,
    peak_rss_mb,
    pin_to_core,
    price_value,
    rating_word,
)

VARIANTS = ("default", "docs")
_ARTICLE = re.compile(r"/docs/[a-z0-9-]+/[a-z0-9]+-[a-z0-9-]+\.html$")
_DENY = re.compile(r"[?&]highlight=")
MAX_DOCS_PAGES = 5_000


def cards(page_url: str, html: bytes) -> list[dict[str, Any]]:
    """The four fields of every product card."""
    tree = LexborHTMLParser(html)
    records = []
    for card in tree.css("article.product_pod"):
        link = card.css_first("h3 a")
        price = card.css_first("p.price_color")
        stars = card.css_first("p.star-rating")
        href = link.attrs.get("href") if link is not None else None
        records.append(
            {
                "title": link.attrs.get("title") if link is not None else None,
                "url": urljoin(page_url, href.strip()) if href else None,
                "price": price_value(price.text(strip=True)) if price is not None else None,
                "rating": rating_word(stars.attrs.get("class") or "") if stars is not None else None,
            }
        )
    return records


def article(page_url: str, tree: LexborHTMLParser) -> dict[str, Any] | None:
    """The fields of a docs article (None for an index page, which is followed, not extracted)."""
    if not _ARTICLE.search(page_url):
        return None
    canonical = tree.css_first("link[rel=canonical]")
    title = tree.css_first("article h1")
    section = tree.css_first("nav.breadcrumb a.section")
    updated = tree.css_first("p.last-updated time")
    href = canonical.attrs.get("href") if canonical is not None else None
    return {
        "url": urljoin(page_url, href.strip()) if href else None,
        "title": title.text() if title is not None else None,
        "section": section.text() if section is not None else None,
        "last_updated": updated.attrs.get("datetime") if updated is not None else None,
    }


def links(page_url: str, tree: LexborHTMLParser, prefix: str) -> list[str]:
    """Every in-scope link of the page's navigation and body: resolved, canonicalized (w3lib)."""
    found = []
    for area in tree.css("nav.docs-nav, main.docs-body"):
        for anchor in area.css("a[href]"):
            url = canonicalize_url(urljoin(page_url, anchor.attrs.get("href") or ""))
            if url.startswith(prefix) and not _DENY.search(url):
                found.append(url)
    return found


async def crawl_listings(urls: list[str], concurrency: int) -> tuple[int, int, int, dict[str, Any]]:
    ok = failed = records = 0
    sample: dict[str, Any] = {}
    semaphore = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def one(url: str) -> None:
            nonlocal ok, failed, records, sample
            try:
                async with semaphore, session.get(url) as response:
                    response.raise_for_status()
                    body = await response.read()
            except (aiohttp.ClientError, TimeoutError):
                failed += 1
                return
            found = [r for r in cards(url, body) if complete(r)]
            ok += 1
            records += len(found)
            sample = sample or (found[0] if found else {})

        await asyncio.gather(*(one(u) for u in urls))
    return ok, failed, records, sample


async def crawl_docs(base: str, concurrency: int, limit: int) -> tuple[int, int, int, dict[str, Any]]:
    """Breadth first from the docs index, ``concurrency`` pages in flight, each page fetched once."""
    prefix = f"{base}/docs/"
    start = canonicalize_url(f"{base}/docs/index.html")
    seen, queue = {start}, deque([start])
    ok = failed = records = 0
    sample: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def one(url: str) -> None:
            nonlocal ok, failed, records, sample
            try:
                async with session.get(url) as response:
                    response.raise_for_status()
                    body = await response.read()
            except (aiohttp.ClientError, TimeoutError):
                failed += 1
                return
            ok += 1
            tree = LexborHTMLParser(body)
            record = article(url, tree)
            if record is not None and all(record.values()):
                records += 1
                sample = sample or record
            for link in links(url, tree, prefix):
                if link not in seen and len(seen) < limit:
                    seen.add(link)
                    queue.append(link)

        running: set[asyncio.Task[None]] = set()
        while queue or running:
            while queue and len(running) < concurrency:
                running.add(asyncio.create_task(one(queue.popleft())))
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
    return ok, failed, records, sample


def main() -> None:
    args = client_args("aiohttp + selectolax peer", VARIANTS)
    pin_to_core(args.core)
    watch = Stopwatch()
    watch.start()
    if args.variant == "docs":
        ok, failed, records, sample = asyncio.run(crawl_docs(args.base, args.concurrency, MAX_DOCS_PAGES))
    else:
        ok, failed, records, sample = asyncio.run(crawl_listings(listing_urls(args.base, args.pages), args.concurrency))
    watch.stop()
    ClientResult(
        "peer",
        args.concurrency,
        args.pages if args.variant != "docs" else ok,
        ok,
        failed,
        records,
        watch.wall_s,
        watch.cpu_s,
        peak_rss_mb(),
        variant="" if args.variant == "default" else args.variant,
        sample=sample,
        rss_before_mb=watch.rss_before_mb,
        system_s=watch.system_s,
    ).emit()


if __name__ == "__main__":
    main()

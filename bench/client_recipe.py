"""The common recipe: asyncio + httpx.AsyncClient + Semaphore + BeautifulSoup(html, "lxml")."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urljoin

import httpx
from bs4 import BeautifulSoup

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


def extract(page_url: str, html: str) -> list[dict[str, Any]]:
    """The four fields of every product card, the way a tutorial would write it."""
    soup = BeautifulSoup(html, "lxml")
    records = []
    for card in soup.select("article.product_pod"):
        link = card.select_one("h3 a")
        price = card.select_one("p.price_color")
        stars = card.select_one("p.star-rating")
        records.append(
            {
                "title": link.get("title") if link else None,
                "url": urljoin(page_url, str(link["href"])) if link and link.has_attr("href") else None,
                "price": price_value(price.get_text(strip=True)) if price else None,
                "rating": rating_word(" ".join(stars.get_attribute_list("class"))) if stars else None,
            }
        )
    return records


async def crawl(urls: list[str], concurrency: int) -> tuple[int, int, int, dict[str, Any]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    semaphore = asyncio.Semaphore(concurrency)
    ok = failed = records = 0
    sample: dict[str, Any] = {}
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def one(url: str) -> None:
            nonlocal ok, failed, records, sample
            try:
                async with semaphore:
                    response = await client.get(url)
                response.raise_for_status()
            except httpx.HTTPError:
                failed += 1
                return
            found = [r for r in extract(url, response.text) if complete(r)]
            ok += 1
            records += len(found)
            sample = sample or found[0]

        await asyncio.gather(*(one(u) for u in urls))
    return ok, failed, records, sample


def main() -> None:
    args = client_args("httpx + BeautifulSoup recipe")
    pin_to_core(args.core)
    urls = listing_urls(args.base, args.pages)
    watch = Stopwatch()
    watch.start()
    ok, failed, records, sample = asyncio.run(crawl(urls, args.concurrency))
    watch.stop()
    ClientResult(
        "recipe",
        args.concurrency,
        args.pages,
        ok,
        failed,
        records,
        watch.wall_s,
        watch.cpu_s,
        peak_rss_mb(),
        sample=sample,
        rss_before_mb=watch.rss_before_mb,
        system_s=watch.system_s,
    ).emit()


if __name__ == "__main__":
    main()

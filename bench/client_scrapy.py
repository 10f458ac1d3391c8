"""Scrapy: one spider, CrawlerProcess, the settings a user would set for this crawl.

CPU and wall time are taken from ``spider_opened`` to ``spider_closed``, so Scrapy's own
start-up (settings, middlewares, reactor) is not charged to the crawl.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response

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


class Tally:
    """Filled in by signal handlers while the crawl runs."""

    def __init__(self) -> None:
        self.watch = Stopwatch()
        self.ok = 0
        self.records = 0
        self.sample: dict[str, Any] = {}

    def opened(self, spider: scrapy.Spider) -> None:
        self.watch.start()

    def closed(self, spider: scrapy.Spider, reason: str) -> None:
        self.watch.stop()

    def item(self, item: dict[str, Any], response: Response, spider: scrapy.Spider) -> None:
        if complete(item):
            self.records += 1
            self.sample = self.sample or dict(item)

    def response(self, response: Response, request: scrapy.Request, spider: scrapy.Spider) -> None:
        if response.status == 200:
            self.ok += 1


class BooksSpider(scrapy.Spider):
    name = "bench-books"
    urls: ClassVar[list[str]] = []

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.urls:
            yield scrapy.Request(url, callback=self.parse, errback=self.failed)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for card in response.css("article.product_pod"):
            href = card.css("h3 a::attr(href)").get()
            yield {
                "title": card.css("h3 a::attr(title)").get(),
                "url": response.urljoin(href) if href else None,
                "price": price_value(card.css("p.price_color::text").get(default="").strip()),
                "rating": rating_word(card.css("p.star-rating::attr(class)").get(default="")),
            }

    def failed(self, failure: Any) -> None:
        self.logger.warning("failed: %s", failure)


def crawl_books(settings: dict[str, Any], urls: list[str]) -> Tally:
    """One BooksSpider run over ``urls`` in this process, its tally filled by Scrapy's signals."""
    tally = Tally()
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BooksSpider)
    crawler.signals.connect(tally.opened, signal=signals.spider_opened)
    crawler.signals.connect(tally.closed, signal=signals.spider_closed)
    crawler.signals.connect(tally.item, signal=signals.item_scraped)
    crawler.signals.connect(tally.response, signal=signals.response_received)
    process.crawl(crawler, urls=urls)
    process.start()
    return tally


def main() -> None:
    args = client_args("Scrapy spider")
    pin_to_core(args.core)
    n = args.concurrency
    settings = {
        "CONCURRENT_REQUESTS": n,
        "CONCURRENT_REQUESTS_PER_DOMAIN": n,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "HTTPCACHE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
    }
    tally = crawl_books(settings, listing_urls(args.base, args.pages))
    ClientResult(
        "scrapy",
        n,
        args.pages,
        tally.ok,
        args.pages - tally.ok,
        tally.records,
        tally.watch.wall_s,
        tally.watch.cpu_s,
        peak_rss_mb(),
        sample=tally.sample,
        rss_before_mb=tally.watch.rss_before_mb,
        system_s=tally.watch.system_s,
    ).emit()


if __name__ == "__main__":
    main()

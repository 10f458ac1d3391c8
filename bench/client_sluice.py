"""Sluice: the engine's own path, Crawl + PageFetcher (fetch, decode, extract) over seed URLs.

``--variant`` picks the transport: ``default`` is whatever PageFetcher uses when given none;
the others are built from sluice.fetch.transport with the limits PageFetcher would use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from bench.common import ClientResult, Stopwatch, client_args, complete, peak_rss_mb, pin_to_core
from sluice.extraction.extract import Record
from sluice.fetch import transport as transports
from sluice.fetch.client import PageFetcher
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.crawl.engine import Crawl

VARIANTS = ("default", "httpx", "aiohttp", "httpx-sharded", "docs")
"""Transports; ``docs`` is the default transport on the demo site's link-heavy documentation site."""


def bench_spec(base: str, pages: int, concurrency: int) -> CrawlSpec:
    """The demo catalogue's listing pages 1..pages, four fields per card, no links followed."""
    return parse_spec(bench_spec_data(base, pages, concurrency), "bench")


def bench_spec_data(base: str, pages: int, concurrency: int) -> dict[str, Any]:
    """:func:`bench_spec` as the data a spec file holds."""
    return dict(
        {
            "name": "bench-books",
            "seeds": {"template": f"{base}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": pages}},
            "follow": {"max_depth": 0, "max_pages": max(pages, 1)},
            "extract": {
                "item": "article.product_pod",
                "fields": {
                    "title": {"selector": "h3 a::attr(title)", "required": True},
                    "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"], "required": True},
                    "price": {"selector": "p.price_color::text", "process": ["strip", "price"], "required": True},
                    "rating": {"selector": "p.star-rating::attr(class)", "process": [{"regex": r"star-rating (\w+)"}]},
                },
            },
            "politeness": {
                "concurrency": concurrency,
                "concurrency_per_domain": concurrency,
                "min_delay_seconds": 0,
                "obey_robots": False,
            },
        }
    )


def make_transport(variant: str, concurrency: int) -> httpx.AsyncBaseTransport | None:
    """The transport for ``variant`` (None: PageFetcher's default), with PageFetcher's limits."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency, keepalive_expiry=30.0)
    if variant == "httpx":
        return transports.httpx_transport(limits)
    if variant == "aiohttp":
        return transports.aiohttp_transport(limits)
    if variant == "httpx-sharded":
        return transports.ShardedTransport.of_httpx(limits)
    return None


def transport_name(fetcher: PageFetcher) -> str:
    """What the fetcher ended up sending through (for the report only): an injected transport, else its wire."""
    transport = getattr(fetcher, "_transport", None)
    if transport is not None:
        return type(transport).__name__
    wire = getattr(fetcher, "_wire", None)
    return type(wire).__name__ if wire is not None else "unknown"


class CountingSink:
    """Counts complete records; keeps the first one as a sample."""

    def __init__(self) -> None:
        self.records = 0
        self.sample: dict[str, Any] = {}

    def write(self, records: Sequence[Record]) -> None:
        for record in records:
            if complete(record.data) or "rating" not in record.data:  # docs pages have no rating to check
                self.records += 1
        if not self.sample and records:
            self.sample = dict(records[0].data)


async def crawl(spec: CrawlSpec, variant: str, watch: Stopwatch) -> tuple[int, int, CountingSink, str]:
    sink = CountingSink()
    fetcher = PageFetcher(
        spec.politeness, allow_loopback=True, transport=make_transport(variant, spec.politeness.concurrency)
    )
    async with fetcher:
        watch.start()
        tally = await Crawl(spec, sink, fetcher=fetcher).run()
        watch.stop()
        used = transport_name(fetcher)
    return tally.fetched, tally.failed + tally.skipped, sink, used


def main() -> None:
    args = client_args("Sluice engine", VARIANTS)
    pin_to_core(args.core)
    if args.variant == "docs":
        from bench.client_pipeline import docs_spec

        spec = docs_spec(args.base, args.concurrency)
    else:
        spec = bench_spec(args.base, args.pages, args.concurrency)
    watch = Stopwatch()
    transport = "default" if args.variant == "docs" else args.variant
    ok, failed, sink, used = asyncio.run(crawl(spec, transport, watch))
    ClientResult(
        "sluice",
        args.concurrency,
        args.pages if args.variant != "docs" else ok,
        ok,
        failed,
        sink.records,
        watch.wall_s,
        watch.cpu_s,
        peak_rss_mb(),
        variant=args.variant,
        sample=sink.sample,
        rss_before_mb=watch.rss_before_mb,
        system_s=watch.system_s,
        notes=[f"transport {used}"],
    ).emit()


if __name__ == "__main__":
    main()

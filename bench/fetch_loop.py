"""The fetch path alone: ``PageFetcher.fetch_many`` over the bench server's listing pages, nothing extracted.

``python -m bench.fetch_loop --base URL --pages N [--concurrency 32]`` fetches 64 pages to warm up, then
N pages (listing pages 1..2900, round robin) with the default wire, and prints ``FETCH_LOOP ok/N CPU-us a
page`` (``time.process_time``). Under ``valgrind --tool=callgrind`` two runs of different N give a page's
instructions as (I(N2) - I(N1)) / (N2 - N1), the same whatever else the machine runs. Diagnostic only:
nothing here is part of the product or of ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from sluice.fetch.client import PageFetcher
from sluice.fetch.outcomes import Fetched
from sluice.spec import Politeness

WARM_UP = 64
LISTINGS = 2900
"""Listing pages asked for (round robin): under a ``bench.serve --prerender 3000``."""


async def loop(base: str, pages: int, concurrency: int) -> tuple[int, float]:
    """Pages fetched and CPU seconds, after the warm-up."""
    spec = Politeness(
        concurrency=concurrency, concurrency_per_domain=concurrency, min_delay_seconds=0, obey_robots=False
    )
    async with PageFetcher(spec, allow_loopback=True) as fetcher:
        async for _ in fetcher.fetch_many([(f"{base}/catalogue/page-{i}.html", None) for i in range(1, WARM_UP + 1)]):
            pass
        started = time.process_time()
        urls = [(f"{base}/catalogue/page-{i % LISTINGS + 1}.html", None) for i in range(pages)]
        ok = 0
        async for outcome in fetcher.fetch_many(urls):
            ok += isinstance(outcome, Fetched)
        return ok, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True)
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    ok, cpu_s = asyncio.run(loop(args.base, args.pages, args.concurrency))
    print(f"FETCH_LOOP {ok}/{args.pages} {cpu_s / max(args.pages, 1) * 1e6:.1f} CPU-us a page", flush=True)


if __name__ == "__main__":
    main()

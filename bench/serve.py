"""The demo site as a benchmark server: its own process, pinned to its own core, pages pre-rendered.

``python -m bench.serve --books B --prerender P [--heavy] --latency-ms L`` renders listing pages
1..P (identity and gzip bodies) before listening, prints ``READY <base url>``, then serves until
its standard input closes or ``--max-seconds`` pass, whichever is first.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from bench.common import SERVER_CORE, pin_to_core
from sluice_tools.demosite.catalogue import Catalogue
from sluice_tools.demosite.config import DemoSiteConfig
from sluice_tools.demosite.server import DemoSite


def prerender(catalogue: Catalogue, pages: int) -> None:
    """Render (and gzip) listing pages 1..pages so no request pays for rendering."""
    for n in range(1, pages + 1):
        page = catalogue.get(catalogue.listing_path(n))
        if page is None:
            raise SystemExit(f"listing page {n} does not exist in {catalogue!r}")
        _ = page.gzipped


async def serve(args: argparse.Namespace) -> None:
    catalogue = Catalogue(books=args.books, per_page=20, heavy=args.heavy)
    started = time.perf_counter()
    prerender(catalogue, args.prerender)
    rendered_s = time.perf_counter() - started
    site = DemoSite(DemoSiteConfig(latency_ms=args.latency_ms, log_limit=1000), catalogue)
    await site.start("127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    print(f"READY {site.base_url} {rendered_s:.2f}", flush=True)
    try:
        await asyncio.wait_for(stdin_closed, timeout=args.max_seconds)
    except TimeoutError:
        print("serve: --max-seconds reached, stopping", file=sys.stderr)
    finally:
        await site.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--books", type=int, required=True)
    parser.add_argument("--prerender", type=int, required=True, help="listing pages to render up front")
    parser.add_argument("--heavy", action="store_true", help="~400 KB listing pages instead of ~50 KB")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    parser.add_argument("--core", type=int, default=SERVER_CORE)
    args = parser.parse_args()
    pin_to_core(args.core)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()

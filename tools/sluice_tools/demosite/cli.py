"""Command line: serve the demo site on a loopback address until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from .catalogue import Catalogue
from .config import DemoSiteConfig
from .server import DemoSite, is_loopback


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by `sluice demo-site`)."""
    p = argparse.ArgumentParser(prog="sluice demo-site", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="loopback address only")
    p.add_argument("--port", type=int, default=8710, help="default 8710, as crawls/demo-books.yaml; 0: any free")
    content = p.add_argument_group("content")
    content.add_argument("--books", type=int, default=1000, help="books in the catalogue (default 1000)")
    content.add_argument("--per-page", type=int, default=20, help="cards per listing page (default 20)")
    content.add_argument("--seed", type=int, default=0, help="seed of the generated titles and prices")
    content.add_argument("--heavy", action="store_true", help="~400 KB listing pages")
    content.add_argument(
        "--version", type=int, default=0, dest="content_version", help="content version: prices change between them"
    )
    content.add_argument(
        "--changed-fraction", type=float, default=0.0, help="share of books (and docs pages) changed per version"
    )
    content.add_argument(
        "--docs-pages", type=int, default=2000, help="articles of the link-heavy docs site under /docs/ (default 2000)"
    )
    content.add_argument("--broken-selector", action="store_true", help="rename the price class, as a redesign would")
    faults = p.add_argument_group("behaviour")
    faults.add_argument("--latency-ms", type=float, default=0.0, help="added before every answer")
    faults.add_argument("--crawl-delay", type=float, default=None, help="Crawl-delay in robots.txt, seconds")
    faults.add_argument("--fail-503", type=float, default=0.0, metavar="FRACTION", help="answer 503 to this share")
    faults.add_argument(
        "--fail-429", type=float, default=0.0, metavar="FRACTION", help="answer 429 with Retry-After to this share"
    )
    faults.add_argument("--retry-after", type=int, default=1, metavar="SECONDS", help="the 429s' Retry-After")
    faults.add_argument("--reset-fraction", type=float, default=0.0, help="reset the connection for this share")
    faults.add_argument("--slow-fraction", type=float, default=0.0, help="trickle the body for this share")
    faults.add_argument("--slow-seconds", type=float, default=1.0, help="how long a trickled body takes")
    faults.add_argument("--oversized-fraction", type=float, default=0.0, help="send a huge body to this share")
    faults.add_argument("--fault-seed", type=int, default=0, help="which requests fault is deterministic per seed")
    faults.add_argument(
        "--faulty-attempts",
        type=int,
        default=3,
        metavar="N",
        help="only the first N requests to a path can fault (default 3); 0: every request can",
    )
    return p


def _site(args: argparse.Namespace) -> DemoSite:
    config = DemoSiteConfig(
        latency_ms=args.latency_ms,
        crawl_delay=args.crawl_delay,
        fail_503_fraction=args.fail_503,
        fail_429_fraction=args.fail_429,
        retry_after_seconds=args.retry_after,
        reset_fraction=args.reset_fraction,
        slow_body_fraction=args.slow_fraction,
        slow_body_seconds=args.slow_seconds,
        oversized_fraction=args.oversized_fraction,
        fault_seed=args.fault_seed,
        faulty_attempts=args.faulty_attempts or None,
    )
    catalogue = Catalogue(
        books=args.books,
        per_page=args.per_page,
        seed=args.seed,
        heavy=args.heavy,
        version=args.content_version,
        changed_fraction=args.changed_fraction,
        broken_selector=args.broken_selector,
        docs_pages=args.docs_pages,
    )
    return DemoSite(config, catalogue)


async def _serve(site: DemoSite, host: str, port: int) -> None:
    await site.start(host, port)
    print(f"Sluice demo site serving at {site.base_url}/", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await site.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, serve until interrupted; returns the exit status."""
    args = build_parser().parse_args(argv)
    if not is_loopback(args.host):
        print(
            f"error: --host must be a loopback address (127.0.0.1, ::1, localhost), "
            f"not {args.host!r}: the demo site never listens on other interfaces",
            file=sys.stderr,
        )
        return 2
    try:
        site = _site(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(site, args.host, args.port))
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0

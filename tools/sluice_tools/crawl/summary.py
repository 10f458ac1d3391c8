"""Local crawls with a progress bar on stderr and a summary a person can read at a glance."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sluice.domain.pages import MAX_URL
from sluice.spec import CrawlSpec
from sluice_tools.crawl.engine import CrawlTally, crawl
from sluice_tools.crawl.sinks import JsonlSink


def limit_lines(max_pages: int, capped: int, max_depth: int, beyond: int) -> list[str]:
    """What the crawl's limits left out, for people: nothing when no limit was reached."""
    lines = []
    if capped:
        lines.append(f"  limits   max_pages ({max_pages}) reached: {capped} new link(s) left unvisited")
    if beyond:
        lines.append(f"  limits   max_depth ({max_depth}) reached: up to {beyond} link(s) beyond it not followed")
    return lines


def summarize(spec: CrawlSpec, tally: CrawlTally, out: Path, elapsed: float) -> dict[str, Any]:
    """The crawl's outcome as data, with a ``text`` rendering for people."""
    summary: dict[str, Any] = {
        "crawl": spec.name,
        "pages": {
            "fetched": tally.fetched,
            "not_modified": tally.not_modified,
            "failed": tally.failed,
            "skipped": tally.skipped,
            "links_dropped": tally.links_dropped,
        },
        "records": tally.records,
        **({"by_type": dict(sorted(tally.by_type.items()))} if spec.types is not None else {}),
        "fallback_keys": tally.fallback_keys,
        "limits": {
            "max_pages": {"limit": spec.follow.max_pages, "links_left": tally.capped_links},
            "max_depth": {"limit": spec.follow.max_depth, "links_left": tally.beyond_depth},
        },
        "rejected": {field: n for field, n in tally.rejected.items() if n},
        "null_rates": {k: round(v, 4) for k, v in tally.null_rates().items()},
        "failures": dict(tally.failures.most_common(5)),
        "skips": dict(tally.skips.most_common(5)),
        "bytes": tally.bytes,
        "elapsed_s": round(elapsed, 3),
        "pages_per_s": round(tally.pages_done / elapsed, 1) if elapsed > 0 else None,
        "outputs": {"records": str(out)},
    }
    lines = [
        f"crawl {spec.name}: {tally.records} records from {tally.pages_done} pages in {elapsed:.1f} s",
        f"  pages    fetched {tally.fetched}, not modified {tally.not_modified}, "
        f"failed {tally.failed}, skipped {tally.skipped}",
    ]
    if spec.types is not None:
        lines.append("  types    " + ", ".join(f"{kind} {tally.by_type.get(kind, 0)} records" for kind in spec.types))
    if tally.failures:
        lines.append("  failures " + ", ".join(f"{r} x{n}" for r, n in tally.failures.most_common(5)))
    if tally.skips:
        lines.append("  skipped  " + ", ".join(f"{r} x{n}" for r, n in tally.skips.most_common(5)))
    dropped = [(f, n) for f, n in tally.rejected.most_common() if n]
    if dropped:
        lines.append(
            "  dropped  records without a required field: " + ", ".join(f"{f} missing x{n}" for f, n in dropped)
        )
    nulls = {k: v for k, v in tally.null_rates().items() if v > 0}
    if nulls:
        lines.append("  nulls    " + ", ".join(f"{f} {v:.0%}" for f, v in nulls.items()))
    lines += limit_lines(spec.follow.max_pages, tally.capped_links, spec.follow.depth_limit, tally.beyond_depth)
    if tally.fallback_keys:
        lines.append(f"  keys     {tally.fallback_keys} record(s) without their key fields, keyed by url or position")
    if tally.links_dropped:
        lines.append(f"  links    {tally.links_dropped} link(s) over {MAX_URL} characters dropped")
    if tally.records:
        lines.append(f"  records  {out}")
    if not tally.records:
        lines.append("  WARNING: no records. A run that writes nothing is a failed run, whatever its exit code.")
    summary["text"] = "\n".join(lines)
    return summary


def crawl_with_progress(spec: CrawlSpec, out: Path, *, allow_loopback: bool, quiet: bool) -> dict[str, Any]:
    """Crawl ``spec`` into ``out`` (JSON Lines), showing pages done and pending, records and errors."""
    console = Console(stderr=True)
    started = time.monotonic()
    with (
        JsonlSink(out) as sink,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("records {task.fields[records]}  errors {task.fields[errors]}"),
            TimeElapsedColumn(),
            console=console,
            disable=quiet,
            transient=False,
        ) as bar,
    ):
        task = bar.add_task(spec.name, total=None, records=0, errors=0)

        def show(tally: CrawlTally, pending: int) -> None:
            done = tally.pages_done
            bar.update(task, completed=done, total=done + pending, records=tally.records, errors=tally.failed)

        tally = asyncio.run(crawl(spec, sink, allow_loopback=allow_loopback, progress=show))
    return summarize(spec, tally, out, time.monotonic() - started)

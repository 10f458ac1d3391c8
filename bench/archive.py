"""The raw archive's cost on the demo crawl: bytes a page, fetcher time a batch, and `sluice reextract`'s pace.

    .venv/bin/python -m bench.archive [--books 10000] [--rounds 3] [--workers 4]

The demo crawl (crawls/demo-books.yaml: listing pages of 20 books, ~50 KB of HTML each) against
the demo site on loopback, ``--books / 20`` listing pages, run by ``sluice run``'s fleet on fresh
state folders, ``--rounds`` times with ``output.archive`` off and on, alternately, the site redesigned (night 3's
broken price selector). Reported: the
archive's bytes a page fetched (gzipped WARC as stored), its files (S3 PUTs) per batch, the time
each batch spent making records and writing its file (``archive_ms`` of the fetcher's ``batch
done`` log lines), the runs' wall times; then `sluice reextract` of the last archived run with the
price selector fixed: pages a second, its records, and the requests the site saw meanwhile (must be 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from sluice.fetch.outcomes import Fetched, Validators
from sluice.messages import UrlTask
from sluice.pipeline.services import load_crawl
from sluice.pipeline.visit.archive import BatchArchive
from sluice.spec import load_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.ops.reextract import reextract_local
from sluice_tools.runner.demo import BROKEN_SELECTOR, FIXED_SELECTOR
from sluice_tools.runner.local import LocalFleet

DEMO_SPEC = Path("crawls/demo-books.yaml")


def _spec_text(base_url: str, listings: int, archive: bool) -> str:
    text = DEMO_SPEC.read_text(encoding="utf-8").replace("http://127.0.0.1:8710", base_url)
    text = text.replace("range: {start: 1, stop: 50}", f"range: {{start: 1, stop: {listings}}}")
    text = text.replace("max_pages: 500", f"max_pages: {max(500, 2 * listings)}")
    return text.replace("archive: true", f"archive: {'true' if archive else 'false'}")


def _batches(state: Path) -> list[dict[str, Any]]:
    lines = []
    for log in state.glob("logs/*.jsonl"):
        for line in log.read_text(encoding="utf-8").splitlines():
            if line.startswith("{") and '"batch done"' in line:
                lines.append(json.loads(line))
    return lines


def _one(base: Path, base_url: str, listings: int, archive: bool, workers: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(dir=base, prefix="archive-" if archive else "plain-"))
    specs = folder / "crawls"
    specs.mkdir()
    path = specs / "demo-books.yaml"
    path.write_text(_spec_text(base_url, listings, archive), encoding="utf-8")
    load_crawl.cache_clear()
    spec = load_spec(path)
    fleet = LocalFleet(specs, folder / "state", workers=workers, allow_loopback=True, say=lambda _: None)
    started = time.perf_counter()
    run = fleet.run(spec)
    wall = time.perf_counter() - started
    batches = [b for b in _batches(folder / "state") if b.get("counted")]
    stored = sum(f.stat().st_size for f in (folder / "state" / "objects" / "archive").rglob("*.warc.gz"))
    return {
        "archive": archive,
        "folder": folder,
        "path": path,
        "run_id": run.run_id,
        "wall_s": wall,
        "pages": run.summary.to_json()["pages"]["fetched"],
        "records": run.summary.to_json()["records"]["total"],
        "batches": len(batches),
        "archive_files": sum(b.get("archive_files", 0) for b in batches),
        "archive_ms": [b["archive_ms"] for b in batches if "archive_ms" in b],
        "archive_bytes": stored,
    }


def _record_ms(body: bytes, rounds: int = 200) -> float:
    """One page's record made and compressed, alone (no batch around it): milliseconds, the median of ``rounds``."""
    archive = BatchArchive("bench", "20261201T000000Z-000000")
    task = UrlTask(url="http://127.0.0.1/catalogue/page-1.html")
    outcome = Fetched(task.url, task.url, 200, "text/html", body, Validators('"e"', None), 1, 0.0)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        archive.add(task, outcome)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--books", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    listings = args.books // 20
    # The redesigned site (night 3's): the shipped selector finds no price, the fixed one every price.
    with tempfile.TemporaryDirectory() as tmp, running_demo_site(books=args.books, broken_selector=True) as site:
        runs = [
            _one(Path(tmp), site.base_url, listings, archive, args.workers)
            for _ in range(args.rounds)
            for archive in (False, True)
        ]
        archived = [r for r in runs if r["archive"]]
        plain = [r for r in runs if not r["archive"]]
        last = archived[-1]
        path: Path = last["path"]
        path.write_text(path.read_text(encoding="utf-8").replace(BROKEN_SELECTOR, FIXED_SELECTOR), encoding="utf-8")
        before = site.stats.total
        done = reextract_local(last["folder"] / "state", last["run_id"], path, path.parent)
        requests = site.stats.total - before
        page = httpx.get(f"{site.base_url}/catalogue/page-1.html", timeout=10).content
    per_batch = [ms for r in archived for ms in r["archive_ms"]]
    pages = sum(r["pages"] for r in archived)
    report = {
        "books": args.books,
        "listing_pages": listings,
        "rounds": args.rounds,
        "archive_bytes_per_page": round(sum(r["archive_bytes"] for r in archived) / pages),
        "gb_per_million_pages": round(sum(r["archive_bytes"] for r in archived) / pages * 1e6 / 1e9, 2),
        "batches_per_run": statistics.median(r["batches"] for r in archived),
        "archive_files_per_batch": round(
            sum(r["archive_files"] for r in archived) / sum(r["batches"] for r in archived), 3
        ),
        "archive_ms_per_batch": {
            "median": round(statistics.median(per_batch), 1),
            "max": round(max(per_batch), 1),
        },
        "pages_per_batch": round(pages / sum(r["batches"] for r in archived), 1),
        "page_bytes": len(page),
        "record_ms_alone": round(_record_ms(page), 2),
        "wall_s_without": [round(r["wall_s"], 2) for r in plain],
        "wall_s_with": [round(r["wall_s"], 2) for r in archived],
        "reextract": {
            "pages": done.pages,
            "records": done.summary.to_json()["records"]["total"],
            "seconds": round(done.seconds, 2),
            "pages_per_s": round(done.pages / done.seconds, 1),
            "requests_to_site": requests,
            "healthy": done.summary.to_json()["verdict"]["healthy"],
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

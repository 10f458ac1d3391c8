"""How finalizing grows with a run: calls, bytes, time and memory at 10,000 and 50,000 pages, measured.

    .venv/bin/python -m bench.finalize_scale [--pages 10000,50000] [--json]

Each size is a real ``sluice run`` on the local store against the demo site (no latency, 64 in
flight): a first run (every page's records from this run's parts) and a nightly run (every page a
304, its records carried from the first run's output). Only the finalizer is measured: its scans of
the run's URLs, its range reads and writes, the bytes they move, its wall time, and how far the
process's resident memory rose while it ran. The per-page figures should not move with size; the
arithmetic for a million pages (docs/benchmarks.md) multiplies them out.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import yaml

from bench.client_sluice import bench_spec_data
from bench.common import RESULT_PREFIX
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.objects import FileObjects, FileWriter
from sluice.spec import parse_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner import local as local_runner
from sluice_tools.runner.local import LocalFleet


@dataclass
class Meter:
    calls: Counter[str] = field(default_factory=Counter)
    bytes: Counter[str] = field(default_factory=Counter)
    entries: int = 0
    wall_s: float = 0.0
    rss_before_mb: float = 0.0
    rss_peak_mb: float = 0.0

    def as_dict(self, pages: int) -> dict[str, Any]:
        return {
            "pages": pages,
            "wall_s": round(self.wall_s, 3),
            "ms_per_page": round(self.wall_s * 1000 / max(1, pages), 4),
            "rss_rise_mb": round(self.rss_peak_mb - self.rss_before_mb, 1),
            "rss_peak_mb": round(self.rss_peak_mb, 1),
            "scan_entries": self.entries,
            "calls": dict(self.calls),
            "bytes": dict(self.bytes),
            "bytes_read_per_page": round(self.bytes["read"] / max(1, pages), 1),
            "bytes_written_per_page": round(self.bytes["written"] / max(1, pages), 1),
        }


@contextmanager
def metered(meter: Meter) -> Iterator[None]:
    """Count the finalizer's store calls and bytes, time it, and watch the process's RSS while it runs."""
    real_scan, real_range = SqliteFrontier.scan, FileObjects.get_range
    real_put, real_write = FileObjects.put, FileWriter.write
    real_finalize = local_runner.finalize_run
    inside = threading.Event()

    def scan(self: SqliteFrontier, run_id: str, *, consistent: bool = True) -> Iterator[Any]:
        if inside.is_set():
            meter.calls["frontier.scan"] += 1
        for entry in real_scan(self, run_id, consistent=consistent):
            meter.entries += inside.is_set()
            yield entry

    def get_range(self: FileObjects, key: str, start: int, length: int) -> bytes:
        data = real_range(self, key, start, length)
        if inside.is_set():
            meter.calls["objects.get_range"] += 1
            meter.bytes["read"] += len(data)
        return data

    def put(self: FileObjects, key: str, body: bytes, content_type: str) -> None:
        if inside.is_set():
            meter.calls["objects.put"] += 1
        real_put(self, key, body, content_type)

    def write(self: FileWriter, data: bytes) -> None:
        if inside.is_set():
            meter.bytes["written"] += len(data)
        real_write(self, data)

    def finalize(*args: Any, **kwargs: Any) -> Any:
        process = psutil.Process()
        meter.rss_before_mb = meter.rss_peak_mb = process.memory_info().rss / 2**20
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.01):
                meter.rss_peak_mb = max(meter.rss_peak_mb, process.memory_info().rss / 2**20)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        inside.set()
        started = time.perf_counter()
        try:
            return real_finalize(*args, **kwargs)
        finally:
            meter.wall_s += time.perf_counter() - started
            inside.clear()
            stop.set()
            watcher.join(5)

    patches: list[tuple[Any, str, Callable[..., Any]]] = [
        (SqliteFrontier, "scan", scan),
        (FileObjects, "get_range", get_range),
        (FileObjects, "put", put),
        (FileWriter, "write", write),
        (local_runner, "finalize_run", finalize),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def measure(pages: int) -> dict[str, Any]:
    with running_demo_site(books=pages * 20) as site, tempfile.TemporaryDirectory(prefix="bench-finalize-") as folder:
        data = bench_spec_data(site.base_url, pages, 64)
        specs = Path(folder) / "crawls"
        specs.mkdir()
        (specs / f"{data['name']}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        spec = parse_spec(data)
        fleet = LocalFleet(specs, Path(folder) / "state", workers=4, allow_loopback=True)
        results: dict[str, Any] = {}
        for run in ("first", "nightly"):
            meter = Meter()
            started = time.perf_counter()
            with metered(meter):
                done = fleet.run(spec)
            results[run] = meter.as_dict(pages) | {
                "run_s": round(time.perf_counter() - started, 2),
                "records": done.summary["records"]["total"],
                "not_modified": done.summary["pages"]["not_modified"],
                "output_files": len(done.summary["outputs"]["files"]),
            }
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.finalize_scale", description=__doc__)
    parser.add_argument("--pages", default="10000,50000")
    parser.add_argument("--json", action="store_true", help="one RESULT line for the harness")
    args = parser.parse_args(argv)
    found = {}
    for pages in (int(p) for p in args.pages.split(",")):
        found[str(pages)] = measure(pages)
        if not args.json:
            for run, figures in found[str(pages)].items():
                print(
                    f"{pages:>7} pages {run:8} finalize {figures['wall_s']:7.2f} s"
                    f" ({figures['ms_per_page']:.3f} ms/page), RSS +{figures['rss_rise_mb']:.0f} MB,"
                    f" {figures['calls']}, read {figures['bytes_read_per_page']} B/page,"
                    f" wrote {figures['bytes_written_per_page']} B/page",
                    flush=True,
                )
    if args.json:
        print(RESULT_PREFIX + json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

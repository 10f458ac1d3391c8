"""How finalizing grows with a run: calls, bytes, time and memory at 10,000 and 50,000 pages, measured.

    .venv/bin/python -m bench.finalize_scale [--pages 10000,50000] [--json]
    .venv/bin/python -m bench.finalize_scale --synthetic 1000000 [--shard-pages 50000] [--workers 2] [--json]
    .venv/bin/python -m bench.finalize_scale --gets 20000   # S3 GETs of a sharded finalize (--shard-pages-list 625,80)

Each size is a real ``sluice run`` on the local store against the demo site (no latency, 64 in
flight): a first run (every page's records from this run's parts) and a nightly run (every page a
304, its records reused from the first run's output). Only the finalizer is measured: its scans of
the run's URLs, its range reads and writes, the bytes they move, its wall time, and how far the
process's resident memory rose while it ran. The per-page figures should not move with size; the
arithmetic for a million pages (docs/benchmarks.md) multiplies them out.

``--synthetic N`` writes N page results straight into a local store (``sluice_tools.synthetic``:
no crawl; 10 records a page, a share failed, skipped, or holding a key another page holds), then
finalizes them sharded, each shard task in a fresh process (the pipeline's own task, over the same
SQLite file), so each task's peak RSS is its own, as a Lambda invocation's would be; a nightly run
over the same URLs follows (7 in 10 pages reused from the first run's output, 1 in 10 gone).
It reports the wall time of each phase, the slowest task and the largest peak RSS per phase, and
the combine's (the parent process's) peak RSS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import resource
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import yaml

from bench.client_sluice import bench_spec_data
from bench.common import RESULT_PREFIX
from bench.finalize_gets_doc import rewrite_finalize_gets
from sluice.adapters.local import LocalStore
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.objects import FileObjects, FileWriter
from sluice.domain.cost import US_EAST_1
from sluice.domain.shards import Shard
from sluice.pipeline.finalize.driver import Finalized, finalize_run, shard_completed
from sluice.pipeline.finalize.shards import Attempt, run_task
from sluice.pipeline.services import Services, Tuning
from sluice.spec import parse_spec
from sluice_tools import synthetic
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
    real_finalize = finalize_run  # what local_runner calls (patched below)
    inside = threading.Event()

    def scan(
        self: SqliteFrontier, run_id: str, *, consistent: bool = True, shard: Shard | None = None
    ) -> Iterator[Any]:
        if inside.is_set():
            meter.calls["frontier.scan"] += 1
        for entry in real_scan(self, run_id, consistent=consistent, shard=shard):
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
                "records": done.summary.to_json()["records"]["total"],
                "not_modified": done.summary.to_json()["pages"]["not_modified"],
                "output_files": len(done.summary.to_json()["outputs"]["files"]),
            }
        return results


class ProcessShards:
    """Finalize shard tasks in a process pool, one fresh process a task: the local store's own
    ``ShardTasks``, measuring each task's time and peak RSS. Completions are recorded as the queue's
    completion set records them; the one that makes a phase whole moves the attempt on (here, in the
    parent), and what the combine finalized is kept."""

    def __init__(self, folder: Path, specs: Path, tuning: Tuning, workers: int) -> None:
        self.folder, self.specs, self.tuning, self.workers = folder, specs, tuning, workers
        self.services: Services | None = None
        self.done_sets: dict[tuple[str, str], set[int]] = {}
        self.phases: list[dict[str, Any]] = []
        self.finalized: Finalized | None = None

    def start(self, attempt: Mapping[str, object], phase: str) -> None:
        assert self.services is not None
        plain = dict(attempt)
        count = int(str(plain["count"]))
        started = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        with context.Pool(self.workers, maxtasksperchild=1) as pool:
            args = [(str(self.folder), str(self.specs), self.tuning, plain, phase, i) for i in range(count)]
            tasks = pool.starmap(_one_task, args, chunksize=1)
        self.phases.append(
            {
                "phase": phase,
                "shards": count,
                "wall_s": round(time.perf_counter() - started, 2),
                "slowest_task_s": round(max(t["seconds"] for t in tasks), 2),
                "peak_rss_mb": round(max(t["rss_mb"] for t in tasks), 1),
                "median_rss_mb": round(sorted(t["rss_mb"] for t in tasks)[count // 2], 1),
            }
        )
        for index in range(count):
            result = shard_completed(self.services, Attempt.from_plain(plain), phase, index)
            if result is not None:
                self.finalized = result

    def done(self, attempt: Mapping[str, object], phase: str, shard: int, count: int) -> bool:
        seen = self.done_sets.setdefault((str(attempt["attempt"]), phase), set())
        if shard in seen:
            return False
        seen.add(shard)
        return len(seen) == count


def _one_task(
    folder: str, specs: str, tuning: Tuning, attempt: dict[str, object], phase: str, index: int
) -> dict[str, float]:
    """One shard task in this (fresh) process: the pipeline's own, on the same store."""
    started = time.perf_counter()
    store = LocalStore.open(Path(folder))
    try:
        services = store.services(Path(specs), tuning, finalize_later=_never, continue_start=_never)
        plan = Attempt.from_plain(dict(attempt))
        run = services.ledger.get_run(plan.crawl, plan.run_id)
        assert run is not None
        run_task(services, run, services.spec(plan.crawl), plan, phase, index)
    finally:
        store.close()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return {"seconds": time.perf_counter() - started, "rss_mb": peak_kb / 1024}


def _never(_: dict[str, object]) -> None:
    raise AssertionError("no trigger in a synthetic run")


def measure_synthetic(pages: int, shard_pages: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-synthetic-") as tmp:
        folder, specs = Path(tmp) / "state", Path(tmp) / "crawls"
        synthetic.write_spec(specs)
        tuning = Tuning(finalize_shard_pages=shard_pages)
        shards = ProcessShards(folder, specs, tuning, workers)
        store = LocalStore.open(folder)
        found: dict[str, Any] = {}
        try:
            services = dataclasses.replace(
                store.services(specs, tuning, finalize_later=_never, continue_start=_never), finalize_shards=shards
            )
            shards.services = services
            catalog = None
            for night in (1, 2):
                started = time.perf_counter()
                run_id = synthetic.write_run(store, pages, night=night, catalog_run=catalog)
                written_s = time.perf_counter() - started
                shards.phases, shards.finalized = [], None
                started = time.perf_counter()
                finalize_run(synthetic.CRAWL, run_id, services)
                finalize_s = time.perf_counter() - started
                done = shards.finalized
                assert done is not None, "the synthetic run did not finalize"
                found["first" if night == 1 else "nightly"] = {
                    "pages": pages,
                    "write_s": round(written_s, 1),
                    "finalize_wall_s": round(finalize_s, 1),
                    "phases": shards.phases,
                    "combine_process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                    "records": done.summary.to_json()["records"]["total"],
                    "duplicates_dropped": done.summary.to_json()["records"]["duplicates_dropped"],
                    "gone": done.summary.to_json()["records"]["gone"],
                    "output_files": len(done.summary.to_json()["outputs"]["files"]),
                    "shards": done.summary.to_json()["finalize_shards"],
                    "task_seconds": done.summary.to_json()["finalize_s"],
                }
                catalog = run_id
        finally:
            store.close()
        return found


GETS_KINDS = ("parts", "catalog output", "catalog index", "shard results", "other")


def _get_kind(key: str) -> str:
    if "/parts/" in key:
        return "parts"
    if "/finalize/" in key:
        return "shard results"
    if key.endswith("pages.index"):
        return "catalog index"
    if "/records/" in key or key.endswith(".jsonl"):
        return "catalog output"
    return "other"


def measure_gets(pages: int, shard_pages: int) -> dict[str, Any]:
    """The S3 GET-class requests (whole and ranged reads) of finalizing a first and a nightly synthetic run of
    ``pages`` in shards of at most ``shard_pages``, counted by what they read and priced per million pages.

    Every shard task runs in this process (the local thread pool); the local store's reads are the calls
    the S3 adapter makes one for one (``get`` one GetObject, ``get_range`` one ranged GetObject)."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    real_get, real_range = FileObjects.get, FileObjects.get_range

    def get(self: FileObjects, key: str) -> bytes | None:
        with lock:
            counts[_get_kind(key)] += 1
        return real_get(self, key)

    def get_range(self: FileObjects, key: str, start: int, length: int) -> bytes:
        with lock:
            counts[_get_kind(key)] += 1
        return real_range(self, key, start, length)

    found: dict[str, Any] = {"pages": pages, "shard_pages": shard_pages}
    with tempfile.TemporaryDirectory(prefix="bench-gets-") as tmp:
        folder, specs = Path(tmp) / "state", Path(tmp) / "crawls"
        synthetic.write_spec(specs)
        store = LocalStore.open(folder)
        try:
            services = store.services(
                specs, Tuning(finalize_shard_pages=shard_pages), finalize_later=_never, continue_start=_never
            )
            catalog = None
            for night in (1, 2):
                run_id = synthetic.write_run(store, pages, night=night, catalog_run=catalog)
                counts.clear()
                FileObjects.get, FileObjects.get_range = get, get_range  # type: ignore[method-assign]
                try:
                    done = finalize_run(synthetic.CRAWL, run_id, services)
                finally:
                    FileObjects.get, FileObjects.get_range = real_get, real_range  # type: ignore[method-assign]
                assert done is not None, "the synthetic run did not finalize"
                total = sum(counts.values())
                fetched = int(done.summary.to_json()["pages"]["fetched"])
                found["first" if night == 1 else "nightly"] = {
                    "shards": done.summary.to_json()["finalize_shards"],
                    "fetched": fetched,
                    "gets": total,
                    "by_kind": {k: counts[k] for k in GETS_KINDS if counts[k]},
                    "gets_per_million_pages": round(total / pages * 1e6),
                    "usd_per_million_pages": round(total / pages * 1e3 * US_EAST_1.s3_per_thousand_get, 4),
                }
                catalog = run_id
        finally:
            store.close()
    return found


RESULTS = Path("bench/results")
DOC = Path("docs/benchmarks.md")
SECTION = "## Finalizing in shards (synthetic runs)"


BASELINE_MB = 90.0
"""A fresh interpreter with the pipeline imported, before a task's work (what every task's peak includes)."""


def _extrapolated(largest: dict[str, Any]) -> str:
    """The largest run's worst task, per page of its shard, carried to a million and ten million pages."""
    worst = max((p for run in ("first", "nightly") for p in largest[run]["phases"]), key=lambda p: p["peak_rss_mb"])
    slowest = max(p["slowest_task_s"] for run in ("first", "nightly") for p in largest[run]["phases"])
    pages = largest["first"]["pages"] / largest["first"]["shards"]
    per_page_kb = (worst["peak_rss_mb"] - BASELINE_MB) * 1024 / pages
    lines = [
        f"\nThe worst task of the largest run above ({worst['phase']}, {pages:,.0f} pages a shard) peaked at"
        f" {worst['peak_rss_mb']:.0f} MB:"
        f" about {per_page_kb:.1f} KB a page of its shard over the interpreter's ~{BASELINE_MB:.0f} MB, and at most"
        f" {slowest:.0f} s. A task's work is its shard's, whatever the run's size (a keys task reads 1/N of every"
        " shard's digests), so:\n"
    ]
    for run_pages in (1_000_000, 10_000_000):
        if run_pages <= largest["first"]["pages"]:
            continue  # measured in the table
        shards = 1
        while shards * 50_000 < run_pages:
            shards *= 2
        each = run_pages / shards
        lines.append(
            f"- {run_pages:,} pages: {shards} shards of {each:,.0f} pages, about"
            f" {BASELINE_MB + per_page_kb * each / 1024:.0f} MB and {slowest * each / pages:.0f} s a task at most"
            f" (extrapolated from the {largest['first']['pages']:,}-page run, not measured)."
        )
    return "\n".join(lines) + "\n"


def write_doc() -> None:
    """The section of docs/benchmarks.md, from every ``finalize-synthetic-N.json`` kept (the largest first)."""
    found = [json.loads(p.read_text()) for p in RESULTS.glob("finalize-synthetic-*.json")]
    found.sort(key=lambda f: -int(f["first"]["pages"]))
    rows = []
    for f in found:
        for run in ("first", "nightly"):
            r = f[run]
            phases = {p["phase"]: p for p in r["phases"]}
            rows.append(
                f"| {r['pages']:,} | {run} | {r['shards']} | {r['finalize_wall_s']} | {r['task_seconds']:,.0f} | "
                + " | ".join(
                    f"{phases[p]['slowest_task_s']} s, {phases[p]['peak_rss_mb']:.0f} MB"
                    for p in ("scan", "keys", "write")
                )
                + f" | {r['combine_process_peak_rss_mb']:.0f} MB | {r['records']:,} |"
            )
    commands = "; ".join(f"`{f['command']}` ({f['date']})" for f in found)
    body = (
        f"{SECTION}\n\n"
        f"{commands}: N page results written straight into the local store (`sluice_tools.synthetic`, 10 records a "
        "page, 1 in 97 failed, 1 in 89 skipped, 1 in 50 holding a key another page holds), then finalized in shards "
        "of at most 50,000 pages, every shard task in a fresh process (2 at a time) so its peak RSS (`ru_maxrss`) is "
        "its own, as a Lambda invocation's is; then a nightly run of the same URLs (7 in 10 reused from the first "
        "run's output, 2 changed, 1 gone). Per phase: the slowest task and the largest peak RSS of its tasks "
        "(a fresh interpreter with the pipeline imported is about 90 MB of it). *task s* is the tasks' own "
        "seconds, summed (what Lambda would bill); *wall s* includes starting a process per task on this shared "
        "2-core machine.\n\n"
        "| pages | run | shards | wall s | task s | scan: slowest, peak RSS | keys | write | combine process RSS "
        "| records |\n"
        "|---:|---|---:|---:|---:|---|---|---|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    if found:
        body += _extrapolated(found[0])
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    if SECTION in text:
        start = text.index(SECTION)
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + body + ("\n" + text[end + 1 :] if end != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    DOC.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.finalize_scale", description=__doc__)
    parser.add_argument("--pages", default="10000,50000")
    parser.add_argument("--synthetic", type=int, default=0, help="pages written straight into the store")
    parser.add_argument("--shard-pages", type=int, default=50_000, help="finalize_shard_pages")
    parser.add_argument(
        "--shard-pages-list", default="", help="with --gets: several finalize_shard_pages, comma-separated"
    )
    parser.add_argument("--workers", type=int, default=2, help="shard tasks at once (processes)")
    parser.add_argument("--gets", type=int, default=0, help="count a sharded finalize's S3 GETs at N pages")
    parser.add_argument("--json", action="store_true", help="one RESULT line for the harness")
    parser.add_argument("--doc", action="store_true", help="only rewrite the doc's section from kept results")
    args = parser.parse_args(argv)
    if args.doc:
        write_doc()
        return 0
    if args.gets:
        sizes = [int(p) for p in str(args.shard_pages_list or args.shard_pages).split(",")]
        counted = [measure_gets(args.gets, size) for size in sizes]
        for figures in counted:
            for run in ("first", "nightly"):
                r = figures[run]
                print(
                    f"{args.gets:>8} pages {run:8} {r['shards']:>4} shards: {r['gets']:>7} GETs"
                    f" ({r['gets_per_million_pages']:,} per million pages, ${r['usd_per_million_pages']})"
                    f" {r['by_kind']}",
                    flush=True,
                )
        command = f"python -m bench.finalize_scale --gets {args.gets} --shard-pages-list {','.join(map(str, sizes))}"
        kept = {"command": command, "date": f"{datetime.now(UTC):%Y-%m-%d}", "runs": counted}
        previous = RESULTS / "finalize-gets.json"
        if previous.exists():  # the figures of the design before (write tasks by URL shard), kept as measured
            kept["before"] = json.loads(previous.read_text()).get("before")
        RESULTS.mkdir(parents=True, exist_ok=True)
        previous.write_text(json.dumps(kept, indent=1) + "\n")
        rewrite_finalize_gets(Path("docs/costs.md"), kept)
        if args.json:
            print(RESULT_PREFIX + json.dumps({"gets": counted}))
        return 0
    if args.synthetic:
        measured = measure_synthetic(args.synthetic, args.shard_pages, args.workers)
        measured["command"] = (
            f"python -m bench.finalize_scale --synthetic {args.synthetic} --shard-pages {args.shard_pages}"
            f" --workers {args.workers}"
        )
        measured["date"] = f"{datetime.now(UTC):%Y-%m-%d}"
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"finalize-synthetic-{args.synthetic}.json").write_text(json.dumps(measured, indent=1) + "\n")
        write_doc()
        if args.json:
            print(RESULT_PREFIX + json.dumps({"synthetic": measured}))
            return 0
        for run, figures in measured.items():
            if run not in ("first", "nightly"):
                continue
            print(
                f"{figures['pages']:>9} pages {run:8} {figures['shards']} shards: written in {figures['write_s']} s,"
                f" finalized in {figures['finalize_wall_s']} s ({figures['task_seconds']} task-seconds),"
                f" {figures['records']} records, combine process peak RSS {figures['combine_process_peak_rss_mb']} MB",
                flush=True,
            )
            for phase in figures["phases"]:
                print(
                    f"    {phase['phase']:5} {phase['shards']} tasks in {phase['wall_s']} s, slowest"
                    f" {phase['slowest_task_s']} s, peak RSS {phase['peak_rss_mb']} MB"
                    f" (median {phase['median_rss_mb']} MB)",
                    flush=True,
                )
        return 0
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

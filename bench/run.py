"""`make bench`: run every client against the demo site and write results, docs/benchmarks.md and
the README's benchmark section.

    .venv/bin/python -m bench.run            # the full benchmark (~30 minutes, at most --max-minutes)
    .venv/bin/python -m bench.run --quick    # smoke run: 300 pages, 32 in flight, one round

Sluice and the peer (aiohttp + selectolax) are measured in alternating rounds, A B, B A, A B, ...
(bench.rounds), so drift of the machine during a cell hits both alike; Scrapy and the recipe run once
a cell. A row of the results is a client's median run in its cell with every round under ``rounds``.

Each client run is a fresh ``python -m bench.client_NAME`` process pinned to core 0 against a
demo-site process pinned to core 1 (see serve.py); the harness only starts processes and reads
their one-line JSON answers, plus the CPU the server and the rest of the machine used meanwhile.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench import machine, publish, report, rounds
from bench.common import ITEMS_PER_PAGE, RESULT_PREFIX
from bench.server import ServerProcess

CLIENTS = ("sluice", "peer", "scrapy", "recipe")
"""The engine, then its peers: aiohttp + selectolax, a Scrapy spider, the httpx + BeautifulSoup recipe."""
ROUND_CLIENTS = ("sluice", "peer")
"""The clients measured in alternating rounds; the others run once a cell."""
DOCS_PAGES = 2000
"""What a docs-variant client is told (it crawls the whole docs site, 2,021 pages, from its index)."""
PIPELINE_CLIENTS = (
    ("sluice", "default"),
    ("pipeline", "first"),
    ("pipeline", "nightly"),
    ("scrapy_stateful", "batched"),
)
"""The engine alone, ``sluice run`` on the local store (a first and a nightly run), the seed's stateful recipe."""
PIPELINE_CONCURRENCY = 32
TRANSPORTS = ("default", "httpx", "httpx-sharded")
RESULTS = Path("bench/results")
CLIENT_TIMEOUT_S = 300.0
TRANSPORT_CONCURRENCY = 128
TRANSPORT_ROUNDS = 2
Run = dict[str, Any]


def _busy_cpu_s() -> float:
    """CPU seconds all cores have spent busy since boot (idle, iowait and steal excluded)."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def _rusage_cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Harness:
    """Starts client runs within a wall-clock budget, waiting (boundedly) for a quiet machine first."""

    latency_ms: float
    deadline: float
    quiet_wait_left_s: float
    quiet_wait_per_run_s: float = 20.0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def wait_for_quiet(self, threshold: float = 0.15) -> float:
        """Wait until other processes use under ``threshold`` of a core (bounded); returns that share."""
        started = time.monotonic()
        give_up = started + min(self.quiet_wait_per_run_s, self.quiet_wait_left_s, max(0.0, self.left() - 60))
        while True:
            busy0, self0 = _busy_cpu_s(), _rusage_cpu_s(resource.RUSAGE_SELF)
            time.sleep(1.0)
            load = max(0.0, (_busy_cpu_s() - busy0) - (_rusage_cpu_s(resource.RUSAGE_SELF) - self0))
            if load < threshold or time.monotonic() >= give_up:
                self.quiet_wait_left_s -= max(0.0, time.monotonic() - started - 1.0)
                return load
            time.sleep(1.0)

    def run(self, client: str, server: ServerProcess, pages: int, concurrency: int, variant: str = "") -> Run:
        """One fresh client process: its result, plus the server's and everyone else's CPU meanwhile."""
        base: Run = {"client": client, "concurrency": concurrency, "variant": variant, "pages_requested": pages}
        if self.left() < 30:
            return self._show({**base, "error": "skipped: time budget spent"})
        base["load_before"] = self.wait_for_quiet()
        command = [sys.executable, "-m", f"bench.client_{client}", "--base", server.base]
        command += ["--pages", str(pages), "--concurrency", str(concurrency)]
        command += ["--variant", variant] if variant else []
        children, me = resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF
        marks = (time.perf_counter(), server.cpu_s(), _busy_cpu_s(), _rusage_cpu_s(children), _rusage_cpu_s(me))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=min(CLIENT_TIMEOUT_S, self.left()))
        except subprocess.TimeoutExpired:
            return self._show({**base, "error": "timed out"})
        lifetime = time.perf_counter() - marks[0]
        server_cpu = server.cpu_s() - marks[1]
        mine = (_rusage_cpu_s(children) - marks[3]) + (_rusage_cpu_s(me) - marks[4])
        others = (_busy_cpu_s() - marks[2]) - mine - server_cpu
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if done.returncode != 0 or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return self._show({**base, "error": f"exit {done.returncode}: {tail[:200]}"})
        result: Run = {**base, **json.loads(lines[-1].removeprefix(RESULT_PREFIX))}
        result["server_cpu_pct"] = 100 * server_cpu / result["wall_s"] if result["wall_s"] else None
        result["other_cpu_pct"] = max(0.0, 100 * others / lifetime)
        return self._show(result)

    def cell(
        self, clients: list[str], n_rounds: int, server: ServerProcess, pages: int, n: int, variant: str = ""
    ) -> list[Run]:
        """One cell (a page variant at a concurrency): Sluice and the peer in ``n_rounds`` alternating
        rounds (A B, B A, ...), then the other clients once; a row per client, in ``clients`` order."""
        alternating = [c for c in clients if c in ROUND_CLIENTS]
        once = [c for c in clients if c not in ROUND_CLIENTS]
        runs: dict[str, list[Run]] = {c: [] for c in clients}
        for turn, (r, client) in enumerate(rounds.schedule(alternating, n_rounds, once)):
            runs[client].append(self.run(client, server, pages, n, variant) | {"round": r, "turn": turn})
        return [rounds.combine(runs[c]) for c in clients]

    def _show(self, run: Run) -> Run:
        run = report.derive(run, self.latency_ms)
        name = f"  {run['client']:6} {run.get('variant') or '':13} N={run['concurrency']:<4}"
        if "pages_per_s" not in run:
            print(f"{name} {run['error']}", flush=True)
            return run
        flag = "" if run["complete"] else f"  INCOMPLETE: {run['records']} records, want {run['records_expected']}"
        print(
            f"{name} {run['pages_ok']:>5} pages {run['wall_s']:6.2f} s {run['pages_per_s']:6.0f} p/s "
            f"{run['cpu_ms_per_page']:6.2f} CPU-ms/p ÷limit {run['ratio_limit']:.2f} rss {run['peak_rss_mb']:.0f} MB "
            f"srv {run['server_cpu_pct']:.0f}% other {run['other_cpu_pct']:.0f}%{flag}",
            flush=True,
        )
        return run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="smoke run: 300 pages, 32 in flight, one round, no transports")
    add("--pages", type=int, help="listing pages per run (default 1000; --quick 300)")
    add("--latency-ms", type=float, default=50.0)
    add("--clients", default=",".join(CLIENTS), help="comma list of " + ", ".join(CLIENTS))
    add("--concurrency", help="comma list of in-flight counts (default 8,32,128; --quick 32)")
    add("--rounds", type=int, help="alternating sluice/peer rounds a 50 KB cell (default 5; --quick 1)")
    add("--heavy-rounds", type=int, help="alternating rounds a 400 KB cell (default 5; --quick 1)")
    add("--docs-rounds", type=int, help="alternating rounds a docs-site cell (default 2; --quick 1)")
    add(
        "--pipeline-rounds",
        type=int,
        help="alternating engine/sluice run rounds at each pipeline size and on the docs site (default 3; --quick 1)",
    )
    add("--heavy-pages", type=int, help="heavy (~400 KB) pages a run, 0 skips (default 400; --quick 100)")
    add("--heavy-clients", default="sluice,peer,scrapy", help="clients in the heavy-page runs ('' skips)")
    add("--docs-clients", default="sluice,peer", help="clients in the link-heavy docs-site runs ('' skips)")
    add("--transports", default=",".join(TRANSPORTS), help="sluice transports to compare ('' skips)")
    add("--pipeline-pages", help="listing pages for the pipeline runs, comma list (default 1000,10000; --quick 300)")
    add("--no-pipeline", action="store_true", help="skip sluice run vs sluice crawl vs the stateful recipe")
    add("--finalize-pages", help="run sizes whose finalizing is measured (default 10000,50000; --quick: none)")
    add("--max-minutes", type=float, default=35.0, help="runs that would start later are skipped")
    add("--quiet-wait", type=float, default=120.0, help="total seconds to spend waiting for a quiet machine")
    add(
        "--no-docs",
        action="store_true",
        help="leave README.md, docs/benchmarks.md and latest.json alone (--quick implies it)",
    )
    args = parser.parse_args(argv)
    args.pages = args.pages or (300 if args.quick else 1000)
    args.concurrency = [int(c) for c in (args.concurrency or ("32" if args.quick else "8,32,128")).split(",")]
    for name, default in (("rounds", 5), ("heavy_rounds", 5), ("docs_rounds", 2), ("pipeline_rounds", 3)):
        chosen = getattr(args, name)
        setattr(args, name, chosen if chosen is not None else (1 if args.quick else default))
        if not 1 <= getattr(args, name) <= 20:
            parser.error(f"--{name.replace('_', '-')} must be 1..20")
    args.heavy_pages = args.heavy_pages if args.heavy_pages is not None else (100 if args.quick else 400)
    args.clients = [c for c in args.clients.split(",") if c]
    args.heavy_clients = [c for c in args.heavy_clients.split(",") if c]
    args.docs_clients = [c for c in args.docs_clients.split(",") if c]
    args.transports = [] if args.quick else [t for t in args.transports.split(",") if t]
    args.no_docs = args.no_docs or args.quick
    finalize = args.finalize_pages if args.finalize_pages is not None else ("" if args.quick else "10000,50000")
    args.finalize_pages = [int(p) for p in finalize.split(",") if p]
    pipeline = args.pipeline_pages or ("300" if args.quick else "1000,10000")
    args.pipeline_pages = [] if args.no_pipeline else [int(p) for p in pipeline.split(",") if p]
    for name in (*args.clients, *args.heavy_clients, *args.docs_clients):
        if name not in CLIENTS:
            parser.error(f"unknown client {name!r}")
    if not 1 <= args.pages <= 20_000 or not all(1 <= c <= 128 for c in args.concurrency):
        parser.error("pages must be 1..20000 and concurrency 1..128")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    lat = args.latency_ms
    harness = Harness(lat, time.monotonic() + 60 * args.max_minutes, args.quiet_wait)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    result: Run = {
        "started": datetime.now().isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "machine": machine.describe(),
        "config": {
            "pages": args.pages,
            "latency_ms": lat,
            "concurrency": args.concurrency,
            "clients": args.clients,
            "books": args.pages * ITEMS_PER_PAGE,
            "rounds": {"matrix": args.rounds, "heavy": args.heavy_rounds, "docs": args.docs_rounds},
            "round_clients": list(ROUND_CLIENTS),
            "quick": args.quick,
            "heavy": {"pages": args.heavy_pages, "concurrency": args.concurrency, "clients": args.heavy_clients},
            "docs": {"concurrency": args.concurrency, "clients": args.docs_clients},
            "transport_concurrency": TRANSPORT_CONCURRENCY,
        },
        "matrix": [],
        "heavy": [],
        "docs": [],
        "transports": [],
        "pipeline": [],
    }
    result["config"]["pipeline"] = {
        "pages": args.pipeline_pages,
        "concurrency": PIPELINE_CONCURRENCY,
        "rounds": args.pipeline_rounds,
    }
    print(f"bench: {args.pages} pages, {lat:g} ms latency, in flight {args.concurrency}, clients {args.clients}")
    with ServerProcess(books=args.pages * ITEMS_PER_PAGE, prerender=args.pages, latency_ms=lat) as server:
        print(f"server {server.base}: {args.pages} pages pre-rendered in {server.prerender_s:.1f} s", flush=True)
        for n in args.concurrency:
            result["matrix"] += harness.cell(args.clients, args.rounds, server, args.pages, n)
        _checkpoint(result, stamp)
        if args.docs_clients:
            print("link-heavy docs site (2,021 pages, 200+ links each, from its index):", flush=True)
            for n in args.concurrency:
                result["docs"] += harness.cell(args.docs_clients, args.docs_rounds, server, DOCS_PAGES, n, "docs")
            _checkpoint(result, stamp)
        if args.transports:
            print(f"transports (sluice, {TRANSPORT_CONCURRENCY} in flight):", flush=True)
            for variant in args.transports:
                repeats = 1 if variant == "httpx" else TRANSPORT_ROUNDS  # plain httpx takes ~20 s a run
                n = TRANSPORT_CONCURRENCY
                result["transports"] += harness.cell(["sluice"], repeats, server, args.pages, n, variant)
    if args.heavy_pages and args.heavy_clients:
        pages = args.heavy_pages
        with ServerProcess(books=pages * ITEMS_PER_PAGE, prerender=pages, latency_ms=lat, heavy=True) as server:
            print(f"heavy server {server.base}: {pages} pages pre-rendered in {server.prerender_s:.1f} s", flush=True)
            for n in args.concurrency:
                result["heavy"] += harness.cell(args.heavy_clients, args.heavy_rounds, server, pages, n)
        _checkpoint(result, stamp)
    if args.pipeline_pages:
        result["pipeline"] = pipeline_runs(harness, args.pipeline_pages, args.pipeline_rounds)
        _checkpoint(result, stamp)
    if args.finalize_pages:
        result["finalizer"] = finalizer_scale(args.finalize_pages, harness.left())
    result["breakdown"] = breakdown() if "sluice" in args.clients else {}
    _label_transports(result["transports"])
    result["cpu_ratios"] = report.cpu_ratios(result["matrix"], lat)
    result["targets"] = report.targets(result)
    _write(result, stamp, args)


def pipeline_runs(harness: Harness, sizes: list[int], n_rounds: int = 3) -> list[Run]:
    """At each size: the engine and a first ``sluice run`` in ``n_rounds`` alternating rounds (their
    ratio is a target, so the machine's drift must hit both alike), then a nightly run and the stateful
    recipe once; then the docs site, the engine and a first run again in alternating rounds."""
    runs: list[Run] = []
    largest = max(sizes)
    n = PIPELINE_CONCURRENCY
    with ServerProcess(books=largest * ITEMS_PER_PAGE, prerender=largest, latency_ms=harness.latency_ms) as server:
        print(f"pipeline server {server.base}: {largest} pages pre-rendered in {server.prerender_s:.1f} s", flush=True)
        for pages in sizes:
            print(f"pipeline, {pages} listing pages, {n} in flight:", flush=True)
            cell = pipeline_cell(harness, server, pages, PIPELINE_CLIENTS, n_rounds)
            runs += [row | {"size": pages} for row in cell]
        print(f"pipeline, link-heavy docs site, {n} in flight:", flush=True)
        docs = (("sluice", "docs"), ("pipeline", "docs"))
        runs += [row | {"size": "docs"} for row in pipeline_cell(harness, server, 2000, docs, n_rounds)]
    return runs


def pipeline_cell(
    harness: Harness, server: ServerProcess, pages: int, clients: tuple[tuple[str, str], ...], n_rounds: int
) -> list[Run]:
    """The first two (client, variant) pairs in alternating rounds (A B, B A, ...), the rest once; a row
    per pair, in ``clients`` order, each its median run with every round under ``rounds``."""
    names = [f"{client}/{variant}" for client, variant in clients]
    found: dict[str, list[Run]] = {name: [] for name in names}
    for turn, (r, name) in enumerate(rounds.schedule(names[:2], n_rounds, names[2:])):
        client, variant = name.split("/", 1)
        measured = harness.run(client, server, pages, PIPELINE_CONCURRENCY, variant)
        found[name].append(measured | {"round": r, "turn": turn})
    return [rounds.combine(found[name]) for name in names]


def finalizer_scale(sizes: list[int], budget_s: float = 1800.0) -> dict[str, Any]:
    """Finalizing measured at each size on the local store (bench.finalize_scale, its own process),
    within what is left of the run's time budget (it takes ~8 minutes at 10,000 and 50,000 pages)."""
    if budget_s < 60:
        return {"error": "skipped: time budget spent"}
    print(f"finalizer at {', '.join(f'{s:,}' for s in sizes)} pages:", flush=True)
    command = [sys.executable, "-m", "bench.finalize_scale", "--json", "--pages", ",".join(map(str, sizes))]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=min(1800.0, budget_s))
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    found: dict[str, Any] = json.loads(lines[-1].removeprefix(RESULT_PREFIX))
    for pages, runs in found.items():
        for run, figures in runs.items():
            print(
                f"  {int(pages):>7,} {run:8} {figures['wall_s']:7.2f} s, {figures['ms_per_page']:.3f} ms/page,"
                f" RSS +{figures['rss_rise_mb']:.0f} MB",
                flush=True,
            )
    return found


def breakdown() -> dict[str, dict[str, float]]:
    """Sluice's per-page CPU by stage, measured offline (bench.breakdown) in a fresh pinned process."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.breakdown", "--json"], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return {}
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    stages: dict[str, dict[str, float]] = json.loads(lines[-1].removeprefix(RESULT_PREFIX)) if lines else {}
    return stages


def _label_transports(transports: list[Run]) -> None:
    """Name each variant's transport class, e.g. 'default: MappedAiohttpTransport'."""
    for run in transports:
        for note in run.get("notes", []):
            if note.startswith("transport "):
                run["variant"] = f"{run['variant']}: {note.removeprefix('transport ')}"


def _partial(stamp: str) -> Path:
    return RESULTS / f"bench-{stamp}-partial.json"


def _checkpoint(result: Run, stamp: str) -> None:
    """The rows measured so far, kept after each section: a run stopped later (it takes over half an hour
    on a slow machine) keeps what it measured. The finished run's file replaces it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    _partial(stamp).write_text(json.dumps(result, indent=2) + "\n")


def _write(result: Run, stamp: str, args: argparse.Namespace) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"bench-{stamp}{'-quick' if args.quick else ''}.json"
    text = json.dumps(result, indent=2) + "\n"
    path.write_text(text)
    _partial(stamp).unlink(missing_ok=True)
    print(f"\nwrote {path}")
    if not args.no_docs:
        report.LATEST.write_text(text)
        publish.publish(result, publish.source_name(path))
        print(f"wrote {report.LATEST}, {publish.README} and {report.DOCS}")
    print("targets:")
    print("\n".join(report.verdict_lines(result)))


if __name__ == "__main__":
    main()

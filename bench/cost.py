"""`make cost`: what a run costs on AWS, from every call it makes, counted and priced.

    .venv/bin/python -m bench.cost                 # demo, link-heavy and typed crawls, first and nightly runs
    .venv/bin/python -m bench.cost --pages 500     # smaller (the figures per million pages barely move)
    .venv/bin/python -m bench.cost --render-only   # docs/costs.md again from the last report
    .venv/bin/python -m bench.cost --pages 100 --docs 100 --types 5 --copy-scan-only
                                                   # only the Parquet copy's scan, into the last report

Each scenario runs the real Lambda handlers on moto (``sluice run --emulate-aws``) against the demo
site on 127.0.0.1 with 300 ms of latency: every botocore call is metered (requests by operation,
DynamoDB units from item sizes, failed conditions included, S3 request classes, SQS 64 KB chunks)
and each handler invocation is timed. Lambda is priced at the measured invocation time and the
stack's memory. The finalizer's Parquet copy (an Athena ``UNLOAD`` a table) is metered as calls, and its
scan, which moto does not run, is measured from the run's JSON Lines objects (``bench/parquet_copy_cost.py``).
Every scenario runs at two sizes, the one asked for and ``--small-fraction`` of it (a quarter): a run makes
some calls once whatever its size (the finalizer's S3 writes, the scheduler's plan, the index), so the cost per
million pages is the slope between the two and a run's fixed cost the intercept (``cost_report.per_million``),
never one run scaled. The result is written to bench/results/cost-latest.json and docs/costs.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from infra.config import DEFAULT

from bench import cost_report, egress_cost, parquet_copy_cost
from sluice.domain.cost import US_EAST_1
from sluice.handlers import fetcher, finalizer, scheduler
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate import runner as emulated
from sluice_tools.meter.aws_meter import AwsMeter
from sluice_tools.meter.calls import observe_calls
from sluice_tools.meter.prices import price

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
LATENCY_MS = 300
NIGHTLY_CHANGED_PAGES = 0.02
WORKERS = 2
RUNNER_ONLY = frozenset({"sqs.GetQueueAttributes"})
"""Calls the emulated runner makes to watch the queue: no deployed function makes them."""


@dataclass
class Timings:
    """Handler invocations: how many, and their wall time (what Lambda bills)."""

    seconds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, function: str, seconds: float) -> None:
        self.seconds.setdefault(function, []).append(seconds)

    def gb_s(self) -> dict[str, float]:
        memory = {"scheduler": DEFAULT.scheduler.memory_mb, "fetcher": DEFAULT.fetcher.memory_mb}
        memory["finalizer"] = DEFAULT.finalizer.memory_mb
        return {f: sum(s) * memory[f] / 1024 for f, s in self.seconds.items()}


class _Gate:
    """The meter, seeing only what the deployed functions would do: not the runner's own watching.

    The runner's main thread only watches (the run's state, the queue's depth) except while it
    plays EventBridge or an async invoke by calling a handler; every other thread is a fetcher
    container or one of the adapters' pools.
    """

    def __init__(self, meter: AwsMeter) -> None:
        self.meter = meter
        self.main = threading.main_thread()
        self.in_handler = False
        self.active = False
        self.empty_receives = 0
        self.lookups = 0
        """Fetchers' reads of linking pages' results (``Frontier.by_prefix``): made in parallel, not scans."""

    def _counts(self, service: str, operation: str) -> bool:
        if not self.active or f"{service}.{operation}" in RUNNER_ONLY:
            return False
        return threading.current_thread() is not self.main or self.in_handler

    def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        if self._counts(service, operation) and operation != "ReceiveMessage":
            self.meter.before(service, operation, params)
            if operation == "Query" and "begins_with" in str(params.get("KeyConditionExpression", "")):
                self.lookups += 1

    def after(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        response: Mapping[str, Any] | None,
        error: BaseException | None,
        elapsed_s: float,
    ) -> None:
        if not self._counts(service, operation):
            return
        if operation == "ReceiveMessage":
            # The emulated event source polls every 50 ms; AWS's long-polls and bills its idle polls by
            # the minute, not by the run (docs/costs.md counts them with the fixed monthly costs).
            if not (response or {}).get("Messages"):
                self.empty_receives += 1
                return
            self.meter.before(service, operation, params)
        self.meter.after(service, operation, params, response, error, elapsed_s)


@contextmanager
def timed_handlers(timings: Timings, gate: _Gate) -> Iterator[None]:
    """Time every handler invocation; open the gate while a run is under way."""
    real = {"scheduler": scheduler.handler, "fetcher": fetcher.handler, "finalizer": finalizer.handler}

    def wrap(name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        def timed(event: Any, context: Any) -> Any:
            on_main = threading.current_thread() is gate.main
            if name == "scheduler":
                gate.active = True
            if on_main:
                gate.in_handler = True
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                timings.add(name, time.perf_counter() - started)
                if on_main:
                    gate.in_handler = False

        return timed

    modules: dict[str, Any] = {"scheduler": scheduler, "fetcher": fetcher, "finalizer": finalizer}
    for name, handler in real.items():
        modules[name].handler = wrap(name, handler)
    try:
        yield
    finally:
        scheduler.handler, fetcher.handler, finalizer.handler = real["scheduler"], real["fetcher"], real["finalizer"]
        gate.active = False


def _spec(name: str, base_url: str, pages: int) -> dict[str, Any]:
    """A shipped demo spec aimed at the running site, seeding ``pages`` listing pages (books) as shipped."""
    data: dict[str, Any] = yaml.safe_load((ROOT / "crawls" / f"{name}.yaml").read_text(encoding="utf-8"))
    text = json.dumps(data).replace("http://127.0.0.1:8710", base_url)
    text = text.replace("127\\\\.0\\\\.0\\\\.1:8710", "127\\\\.0\\\\.0\\\\.1:" + base_url.rsplit(":", 1)[1])
    data = json.loads(text)
    # The targets are for a crawl that keeps no responses: the demo spec keeps its own (output.archive) for
    # the demo's fourth night, one S3 PUT a batch more, measured apart (docs/architecture.md).
    data.get("output", {}).pop("archive", None)
    if name in ("demo-books", "demo-types"):
        data["seeds"]["range"]["stop"] = pages
        data["follow"]["max_pages"] = pages * (21 if name == "demo-types" else 1) + 10  # a typed page: 20 books
    return data


def run_scenario(
    label: str, folder: Path, data: dict[str, Any], site: RunningDemoSite, before: Callable[[], object]
) -> dict[str, Any]:
    """One run of ``data`` through the emulated stack, every call metered; the run's figures."""
    specs = folder / "crawls"
    specs.mkdir(parents=True, exist_ok=True)
    spec = parse_spec(data)
    (specs / f"{spec.name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    before()
    meter, timings = AwsMeter(), Timings()
    gate = _Gate(meter)
    started = time.perf_counter()
    with observe_calls(gate), timed_handlers(timings, gate):
        run = emulated.EmulatedRunner(specs, folder / "state", workers=WORKERS, allow_loopback=True).run(spec)
    wall = time.perf_counter() - started
    tally = meter.tally()
    gb_s = timings.gb_s()
    invocations = sum(len(s) for s in timings.seconds.values())
    log_bytes = _log_bytes(Path(run.outputs["logs"]))
    cost = price(tally, lambda_gb_s=sum(gb_s.values()), lambda_invocations=invocations, log_bytes=log_bytes)
    pages = run.summary.to_json()["pages"]
    done = pages["fetched"] + pages["not_modified"] + pages["failed"] + pages["skipped"]
    copy = _parquet_copy(folder / "state", spec, run.run_id, run.summary.to_json(), tally.operations) | {"pages": done}
    lines = cost.as_dict() | {"athena_scan": parquet_copy_cost.price(copy["queries"])}
    lines["total"] += lines["athena_scan"]
    return {
        "label": label,
        "crawl": spec.name,
        "concurrency": spec.politeness.concurrency,
        "pages": done,
        "fetched": pages["fetched"],
        "not_modified": pages["not_modified"],
        "records": run.summary.to_json()["records"]["total"],
        "healthy": run.summary.to_json()["verdict"]["healthy"],
        "wall_s": round(wall, 2),
        "cost": lines,
        "per_million_pages_usd": round(lines["total"] / max(1, done) * 1e6, 3),
        "parquet_copy": copy,
        "summary_estimate": run.summary.to_json().get("cost"),
        "lambda": {
            "invocations": {f: len(s) for f, s in timings.seconds.items()},
            "seconds": {f: round(sum(s), 2) for f, s in timings.seconds.items()},
            "gb_s": {f: round(v, 3) for f, v in gb_s.items()},
        },
        "log_bytes": log_bytes,
        "calls": {op: t.requests for op, t in sorted(tally.operations.items())},
        "dynamodb": {
            "wru": tally.wru,
            "rru": tally.rru,
            "wru_per_page": round(tally.wru / max(1, done), 3),
            "wru_by_partition": tally.wru_by_partition,
        },
        "s3": {"bytes_up": tally.s3_bytes_up, "bytes_down": tally.s3_bytes_down},
        "sqs_billed_requests": tally.sqs_billed_requests,
        "site_requests": site.stats.total,
        # What would cross a NAT gateway with egress: fixed (DynamoDB and S3 take the gateway endpoints).
        "site_wire": {
            "bytes_received": site.stats.bytes_received,
            "bytes_sent": site.stats.bytes_sent,
            "connections": site.stats.connections,
        },
        "sqs_bytes": tally.sqs_bytes,
        "empty_receives_left_out": gate.empty_receives,
        "linking_page_lookups": gate.lookups,
    }


def _parquet_copy(
    state_dir: Path, spec: CrawlSpec, run_id: str, summary: dict[str, Any], operations: Mapping[str, Any]
) -> dict[str, Any]:
    """The UNLOADs the finalizer started for the run (one a table, for a run with records) and what each scans,
    measured from the run's JSON Lines objects (moto runs no SQL)."""
    started = operations["athena.StartQueryExecution"].requests if "athena.StartQueryExecution" in operations else 0
    queries = parquet_copy_cost.scanned_bytes(state_dir, spec, run_id) if summary["records"]["total"] else []
    if started != len(queries):
        raise RuntimeError(f"{spec.name}: {started} UNLOAD(s) started, {len(queries)} expected (one a table)")
    return {"started": started, "queries": queries}


def _with_copy_scans(
    scenarios: list[dict[str, Any]], small: list[dict[str, Any]], command: str, when: str
) -> dict[str, Any]:
    """The last full report, each scenario (at both sizes) given the Parquet copy's scans measured now on the same
    scenario (with the pages they were measured on), and where they came from: its other figures stay that run's."""
    report: dict[str, Any] = json.loads((RESULTS / "cost-latest.json").read_text(encoding="utf-8"))
    for kept, measured_now in (("scenarios", scenarios), ("small_scenarios", small)):
        measured = {s["label"]: s["parquet_copy"] for s in measured_now}
        for scenario in report.get(kept, []):
            scenario["parquet_copy"] = measured[scenario["label"]]
    report["prices"] = {k: v for k, v in vars(US_EAST_1).items()}
    report["parquet_copy_from"] = {"command": command, "when": when}
    return report


def _memory() -> dict[str, int]:
    return {
        "scheduler": DEFAULT.scheduler.memory_mb,
        "fetcher": DEFAULT.fetcher.memory_mb,
        "finalizer": DEFAULT.finalizer.memory_mb,
    }


def _log_bytes(path: Path) -> int:
    """What CloudWatch Logs would ingest: the functions' JSON lines (EMF documents included)."""
    return path.stat().st_size if path.exists() else 0


def measure(pages: int, docs: int, types: int, work: Path) -> list[dict[str, Any]]:
    """Every scenario at one size, on a demo site of that size: the first runs, then the nightly runs after them."""
    books = pages * 20
    # A book changes with this probability: a listing page (20 books) changes with 2%.
    per_book = 1 - (1 - NIGHTLY_CHANGED_PAGES) ** (1 / 20)
    scenarios: list[dict[str, Any]] = []
    with running_demo_site(books=books, docs_pages=docs, latency_ms=LATENCY_MS) as site:
        books_spec = _spec("demo-books", site.base_url, pages)
        docs_spec = _spec("demo-docs", site.base_url, docs)
        types_spec = _spec("demo-types", site.base_url, types)
        plans = [
            ("demo crawl, first run", "books", books_spec, lambda: None),
            (
                "demo crawl, nightly (2% of pages changed)",
                "books",
                books_spec,
                lambda: site.set_catalogue(books=books, docs_pages=docs, version=1, changed_fraction=per_book),
            ),
            ("link-heavy crawl, first run", "docs", docs_spec, lambda: None),
            (
                "link-heavy crawl, nightly (2% of pages changed)",
                "docs",
                docs_spec,
                lambda: site.set_catalogue(books=books, docs_pages=docs, version=2, changed_fraction=0.02),
            ),
            # Listings and the book pages they link to, a field carried along each link: every book is claimed
            # by its listing on the first run; the nightly seeds them all from the catalog.
            (
                "typed crawl, first run",
                "types",
                types_spec,
                lambda: site.set_catalogue(books=books, docs_pages=docs),
            ),
            (
                "typed crawl, nightly (2% of books re-priced)",
                "types",
                types_spec,
                lambda: site.set_catalogue(books=books, docs_pages=docs, version=1, changed_fraction=0.02),
            ),
        ]
        for label, folder, data, before in plans:
            site.stats.reset()
            result = run_scenario(label, work / folder, data, site, before)
            scenarios.append(result)
            print(
                f"{label}: {result['pages']} pages ({result['fetched']} fetched, {result['not_modified']} not modified)"
                f" ${result['cost']['total']:.4f} metered ({result['dynamodb']['wru_per_page']} WRU/page);"
                f" {result['wall_s']} s",
                flush=True,
            )
            nat = egress_cost.nat_bytes_a_page(result)
            fixed = egress_cost.per_million(vars(US_EAST_1), result, 1)
            print(
                f"  egress: fixed: {nat['total']:,.0f} bytes a page through NAT (site {nat['site']:,.0f},"
                f" SQS {nat['sqs']:,.0f}): + ${fixed['total']:.2f} per million pages with one NAT gateway",
                flush=True,
            )
    return scenarios


def _smaller(size: int, fraction: float) -> int:
    return max(1, round(size * fraction))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cost", description=__doc__)
    parser.add_argument("--pages", type=int, default=2000, help="listing pages of the demo crawl (default 2000)")
    parser.add_argument("--docs", type=int, default=2000, help="pages of the link-heavy docs site (default 2000)")
    parser.add_argument(
        "--types", type=int, default=100, help="listing pages of the typed crawl, 20 book pages each (default 100)"
    )
    parser.add_argument(
        "--small-fraction",
        type=float,
        default=0.25,
        help="each scenario runs again at this fraction of its size: a run's fixed cost and the cost per million"
        " pages are the intercept and the slope between the two (default 0.25)",
    )
    parser.add_argument("--no-docs-update", action="store_true", help="do not rewrite docs/costs.md")
    parser.add_argument(
        "--copy-scan-only",
        action="store_true",
        help="run the scenarios (small sizes do) and add only their Parquet copy's Athena scans to the last"
        " report (bench/results/cost-latest.json), keeping its other figures; docs/costs.md says so",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: rewrite docs/costs.md from the last report (bench/results/cost-latest.json)",
    )
    args = parser.parse_args(argv)
    if args.render_only:
        return _write_docs(json.loads((RESULTS / "cost-latest.json").read_text(encoding="utf-8")))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        os.environ.setdefault(name, "testing")
    work = Path(tempfile.mkdtemp(prefix="sluice-cost-"))
    small_sizes = {name: _smaller(getattr(args, name), args.small_fraction) for name in ("pages", "docs", "types")}
    # The smaller size first: the intercept and the slope come from the two (docs/costs.md).
    small = measure(small_sizes["pages"], small_sizes["docs"], small_sizes["types"], work / "small")
    scenarios = measure(args.pages, args.docs, args.types, work / "large")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report: dict[str, Any] = {
        "command": "make cost",
        "when": when,
        "site_latency_ms": LATENCY_MS,
        "workers": WORKERS,
        "memory_mb": _memory(),
        "prices": {k: v for k, v in vars(US_EAST_1).items()},
        "scenarios": scenarios,
        "small_fraction": args.small_fraction,
        "small_scenarios": small,
    }
    if args.copy_scan_only:
        given = " ".join(sys.argv[1:] if argv is None else argv)
        report = _with_copy_scans(scenarios, small, f"python -m bench.cost {given}", when)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cost-latest.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print("wrote bench/results/cost-latest.json", flush=True)
    return 0 if args.no_docs_update else _write_docs(report)


def _write_docs(report: dict[str, Any]) -> int:
    concurrency = {str(s["crawl"]): int(s["concurrency"]) for s in report["scenarios"]}
    (ROOT / "docs" / "costs.md").write_text(cost_report.render(report, concurrency), encoding="utf-8")
    print("wrote docs/costs.md", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

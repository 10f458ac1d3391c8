"""``sluice run`` on the local store: the whole pipeline (queue, URL entries, parts, output), as a peer of the engine.

Variants: ``first`` (a fresh state folder, one run), ``nightly`` (a second run over the first one's
state: every page asked "changed since?", all 304, records reused), ``docs`` (the demo site's
link-heavy documentation site, 2,021 pages with 200+ links each, from its index page).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.client_sluice import bench_spec_data
from bench.common import ClientResult, Stopwatch, client_args, complete, peak_rss_mb, pin_to_core
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import LocalRun

VARIANTS = ("first", "nightly", "docs")
ROOT = Path(__file__).resolve().parents[1]


def docs_spec(base: str, concurrency: int) -> CrawlSpec:
    """crawls/demo-docs.yaml aimed at ``base``, at the benchmark's concurrency."""
    return parse_spec(docs_spec_data(base, concurrency), "bench")


def docs_spec_data(base: str, concurrency: int) -> dict[str, Any]:
    """:func:`docs_spec` as the data a spec file holds (its URLs and its allow pattern on ``base``'s port)."""
    text = (ROOT / "crawls" / "demo-docs.yaml").read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text.replace(":8710", ":" + base.rsplit(":", 1)[1]))
    data["politeness"] |= {"concurrency": concurrency, "concurrency_per_domain": concurrency, "obey_robots": False}
    return data


def records_of(run: LocalRun) -> tuple[int, dict[str, Any]]:
    """Complete records in the run's output files, and the first one (read line by line, after the peak is taken)."""
    count = 0
    sample: dict[str, Any] = {}
    for path in sorted(Path(run.outputs["records"]).glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if not sample:
                    sample = record
                count += complete(record) if "rating" in record else 1
    return count, sample


def main() -> None:
    args = client_args("sluice run (local store)", VARIANTS)
    pin_to_core(args.core)
    if args.variant == "docs":
        data = docs_spec_data(args.base, args.concurrency)
    else:
        data = bench_spec_data(args.base, args.pages, args.concurrency)
    spec = parse_spec(data, "bench")
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as folder:
        specs, state = Path(folder) / "crawls", Path(folder) / "state"
        specs.mkdir()
        (specs / f"{spec.name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        fleet = LocalFleet(specs, state, workers=4, allow_loopback=True)
        if args.variant == "nightly":
            fleet.run(spec)  # untimed: the catalog the timed run is seeded from
        watch = Stopwatch()
        watch.start()
        started = time.perf_counter()
        run = fleet.run(spec)
        watch.stop()
        wall = time.perf_counter() - started
        peak = peak_rss_mb()  # the run's, before this client reads the output to count it
        records, sample = records_of(run)
        state_bytes = sum(f.stat().st_size for f in state.rglob("*") if f.is_file())
    pages = run.summary.to_json()["pages"]
    ok = pages["fetched"] + pages["not_modified"]
    ClientResult(
        "pipeline",
        args.concurrency,
        args.pages if args.variant != "docs" else ok,
        ok,
        pages["failed"] + pages["skipped"],
        records,
        wall,
        watch.cpu_s,
        peak,
        variant=args.variant,
        sample=sample,
        rss_before_mb=watch.rss_before_mb,
        system_s=watch.system_s,
        notes=[
            f"{pages['fetched']} fetched, {pages['not_modified']} not modified",
            f"finalize {run.summary.to_json().get('finalize_s', 0):.2f} s",
            f"state {state_bytes} B",
            f"estimated AWS cost per million pages ${run.summary.to_json()['cost']['per_million_pages_usd']:.2f}",
        ],
    ).emit()


if __name__ == "__main__":
    main()

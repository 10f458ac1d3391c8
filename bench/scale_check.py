"""`make scale ARGS=--check`: the scale model's prediction of a real local run, against the run.

    .venv/bin/python -m bench.scale_check [--hosts 20] [--pages 500] [--cap 2] [--latency-ms 300] [--workers 8]

A real ``sluice run`` (the local runner: SQLite, files, one event loop) crawls ``hosts`` demo sites on
loopback (127.0.0.2, 127.0.0.3, ...: each its own host and queue group, see bench/many_hosts.py), 10,000
pages by default, cap 2 a host. The model plays the same night configured as that runner: its workers
as the fleet, no head window (the local queue has none), no AWS call latency, and each page's CPU
(`make bench`'s figure) added to its wait, since every worker shares one event loop. The error is
(predicted - measured) / measured. Bounded: the sites stop after ten minutes (bench/many_hosts.py).
Written to bench/results/scale-check.json, which docs/scale.md shows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.config import DEFAULT

from bench.many_hosts import measure
from sluice_tools.scale.inputs import Site, measured, stack_settings
from sluice_tools.scale.model import BatchOrder, Night, play
from sluice_tools.scale.quotas import load_quotas

RESULT = Path("bench/results/scale-check.json")
SPEC_CONCURRENCY = 64
"""The many-hosts spec's ``politeness.concurrency`` (bench/many_hosts.py)."""


def cpu_share(seconds: float = 2.0) -> float:
    """The part of a core this process gets now: CPU time over wall time of a busy loop (1 on a quiet machine)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall0 < seconds:
        sum(range(10_000))
    return min(1.0, (time.process_time() - cpu0) / (time.perf_counter() - wall0))


def predict(
    hosts: int,
    pages: int,
    cap: int,
    latency_ms: float,
    workers: int,
    share: float = 1.0,
    order: BatchOrder = "interleaved",
) -> dict[str, Any]:
    """The model's night for the local runner with these settings."""
    figures = measured()
    stack = replace(
        stack_settings(DEFAULT), fetcher_max_concurrency=workers, aws_call_s=0.0, sequential_calls_per_batch=0
    )
    site = Site(latency_s=latency_ms / 1000, concurrency=SPEC_CONCURRENCY, concurrency_per_domain=cap)
    night = Night(
        (pages,) * hosts,
        site,
        stack,
        fan_out="seed-order",
        finalizer="single",
        shared_cpu=True,
        cpu_share=share,
        head_window=float("inf"),
        batch_order=order,
    )
    outcome = play(night, load_quotas(), figures)
    return {
        "wall_s": round(outcome.wall_s, 2),
        "bound_s": round(outcome.bound_s, 2),
        "fetch_s": round(outcome.phases["fetch_s"], 2),
        "finalize_s": round(outcome.phases["finalize_s"], 2),
        "invocations": outcome.functions["fetcher"].invocations,
        "cpu_ms_per_page": round(figures.cpu_s * 1000, 3),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=500, help="pages a host")
    parser.add_argument("--cap", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--no-save", action="store_true", help=f"print only; do not write {RESULT}")
    parser.add_argument(
        "--batch-order",
        choices=("by-message", "interleaved"),
        default="interleaved",
        help="the batch order the model plays (interleaved: one host's URL at a time in turn, as visit() does)",
    )
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    load_before = os.getloadavg()[0]
    share = cpu_share()
    setup = (args.hosts, args.pages, args.cap, args.latency_ms, args.workers)
    predicted = predict(*setup, share, args.batch_order)
    quiet = predict(*setup, 1.0, args.batch_order)
    print(
        f"scale check: predicted {predicted['wall_s']} s for {args.hosts * args.pages:,} pages "
        f"({share:.0%} of a core free; {quiet['wall_s']} s on a quiet machine)",
        flush=True,
    )
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    run = measure(args.hosts, args.cap, args.pages, args.latency_ms, args.workers)
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    measured_s = float(run["seconds"])
    # What the runner got of a core during the run (its CPU over the wall): when the sites allowed more than it
    # could parse, this is the share it was starved to; the model at that share says whether that explains it.
    got = min(1.0, cpu_s / measured_s)
    after = predict(*setup, got, args.batch_order)
    result = {
        "command": "make scale ARGS=--check",
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "setup": {
            "hosts": args.hosts,
            "pages": args.hosts * args.pages,
            "cap": args.cap,
            "latency_ms": args.latency_ms,
            "workers": args.workers,
            "spec_concurrency": SPEC_CONCURRENCY,
            "batch_order": args.batch_order,
        },
        "predicted": predicted | {"cpu_share": round(share, 3), "quiet_machine_wall_s": quiet["wall_s"]},
        "measured": {
            "wall_s": measured_s,
            "fetched": run["fetched"],
            "hosts_a_batch": run["hosts_a_batch"],
            "worst_host_concurrency": run["worst_host_concurrency"],
            "runner_cpu_ms_per_page": round(cpu_s / max(1, run["fetched"]) * 1000, 3),
            "load_average_before": round(load_before, 2),
            "with_sites_s": round(elapsed, 2),
        },
        "error": round((predicted["wall_s"] - measured_s) / measured_s, 3),
        "at_the_share_the_runner_got": {
            "cpu_share": round(got, 3),
            "wall_s": after["wall_s"],
            "error": round((after["wall_s"] - measured_s) / measured_s, 3),
        },
    }
    if not args.no_save:
        RESULT.parent.mkdir(parents=True, exist_ok=True)
        RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"scale check: measured {measured_s} s ({run['fetched']:,} pages fetched), predicted {predicted['wall_s']} s: "
        f"error {result['error']:+.1%}" + ("" if args.no_save else f" (wrote {RESULT})"),
        flush=True,
    )
    return result


if __name__ == "__main__":
    main()

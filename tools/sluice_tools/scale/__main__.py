"""`make scale`: play every night of the scenario grid on the stack's settings; print, and write docs/scale.md.

.venv/bin/python -m sluice_tools.scale                  # the grid, a table, docs/scale.md
.venv/bin/python -m sluice_tools.scale --json           # one JSON object a scenario, nothing written
.venv/bin/python -m sluice_tools.scale --sizes 10000000 --hosts 1000
.venv/bin/python -m sluice_tools.scale --check          # also a real local run, predicted against measured
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from dataclasses import replace
from typing import Any

from sluice_tools.scale import doc
from sluice_tools.scale.inputs import ROOT, Measured, Site, Stack, measured, stack_settings
from sluice_tools.scale.model import BatchOrder, FanOut, Finalizer, play
from sluice_tools.scale.quotas import Quotas, load_quotas
from sluice_tools.scale.report import memory_size, record, terminal
from sluice_tools.scale.scenarios import HOST_COUNTS, SIZES, Scenario, scenarios, site_for

RESULTS = ROOT / "bench" / "results" / "scale-latest.json"
"""Every night the last `make scale` played, as docs/scale.md shows them (``--render`` rewrites the doc from it)."""
CHECK = ROOT / "bench" / "results" / "scale-check.json"
"""The last `--check` (bench/scale_check.py), shown again when the doc is rendered from kept results."""
NIGHT_TARGET_S = 8 * 3600.0
"""A nightly crawl should fit in a night: the advice sizes the fleet for this."""
BEFORE = (("seed-order", "single"),)
"""The old mechanisms, played beside the new for the before/after rows."""
NEW: tuple[FanOut, Finalizer] = ("round-robin", "sharded")


def run_grid(
    grid: list[Scenario],
    stack: Stack,
    site: Site,
    quotas: Quotas,
    figures: Measured,
    *,
    before: bool,
    say: Any,
    order: BatchOrder = "interleaved",
) -> list[dict[str, Any]]:
    rows = []
    for scenario in grid:
        plays: list[tuple[FanOut, Finalizer]] = [NEW]
        if before and scenario.hosts > 1 and scenario.urls == 10_000_000:
            plays.insert(0, ("seed-order", "single"))
        for fan_out, finalizer in plays:
            started = time.perf_counter()
            night = scenario.night(stack, site, fan_out=fan_out, finalizer=finalizer, batch_order=order)
            outcome = play(night, quotas, figures)
            row = record(scenario, fan_out, finalizer, outcome, order)
            row["model_s"] = round(time.perf_counter() - started, 2)
            rows.append(row)
            say(row)
    return rows


def advice(
    stack: Stack, site: Site, quotas: Quotas, figures: Measured, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """For each size: the settings that fit an even night over 1,000 hosts in 8 hours, and that night played.

    The fleet is sized by the night the grid played at the defaults: its fetchers, times how far that
    night ran past its bound (what a fetcher really gets done), over 8 hours."""
    out = []
    for row in rows:
        if (row["hosts"], row["distribution"], row["fan_out"]) != (1000, "even", NEW[0]):
            continue
        urls = row["urls"]
        per_fetcher = site.concurrency / site.latency_s / row["wall_over_bound"]
        needed = math.ceil(urls / (NIGHT_TARGET_S * 0.95 * per_fetcher) / 10) * 10
        fetchers = max(stack.fetcher_max_concurrency, needed)
        memory = memory_size(figures.base_rss_mb["scheduler"] + 16 * urls / 1e6)
        tuned = replace(
            stack, fetcher_max_concurrency=fetchers, scheduler_memory_mb=max(stack.scheduler_memory_mb, memory)
        )
        outcome = play(Scenario(urls, 1000, "even").night(tuned, site), quotas, figures)
        deadline = max(int(stack.run_deadline_s / 3600), math.ceil(outcome.wall_s / 3600) + 1)
        out.append(
            {
                "urls": urls,
                "fetcher_max_concurrency": fetchers,
                "scheduler_memory_mb": tuned.scheduler_memory_mb,
                "run_deadline_hours": deadline,
                "shards": outcome.shards,
                "wall_s": outcome.wall_s,
                "limits_crossed": outcome.limits_crossed,
            }
        )
    return out


PUSHED_FLEETS = (100, 1000)
"""fetcher_max_concurrency values the doc plays a 100M night at, to show where the stack's partitions give out."""


def pushed(stack: Stack, site: Site, quotas: Quotas, figures: Measured, say: Any) -> list[dict[str, Any]]:
    """The 100M-URL night over 10,000 hosts, even, with more fetchers than the defaults."""
    rows = []
    for fetchers in PUSHED_FLEETS:
        scenario = Scenario(100_000_000, 10_000, "even")
        outcome = play(scenario.night(replace(stack, fetcher_max_concurrency=fetchers), site), quotas, figures)
        row = record(scenario, *NEW, outcome) | {"fetcher_max_concurrency": fetchers}
        rows.append(row)
        say(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make scale", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="one JSON object a scenario on stdout; write nothing")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="URLs a night (default: 1M 10M 100M)")
    parser.add_argument("--hosts", type=int, nargs="+", default=list(HOST_COUNTS), help="host counts")
    parser.add_argument("--fetchers", type=int, default=None, help="play with this fetcher_max_concurrency")
    parser.add_argument("--no-before", action="store_true", help="skip the old fan-out and finalizer rows")
    parser.add_argument(
        "--batch-order",
        choices=("by-message", "interleaved"),
        default="interleaved",
        help="the order a batch's URLs take its slots: one host at a time in turn, as pipeline/visit/batch.py does, "
        "or in message order, as it did before",
    )
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/scale.md")
    parser.add_argument("--check", action="store_true", help="also a real local run, predicted against measured")
    parser.add_argument(
        "--render",
        action="store_true",
        help=f"rewrite docs/scale.md from the last run's {RESULTS.name}, playing nothing",
    )
    args = parser.parse_args(argv)
    if any(s <= 0 for s in args.sizes) or any(h <= 0 for h in args.hosts):
        parser.error("--sizes and --hosts take positive numbers")
    if any(h > s for s in args.sizes for h in args.hosts):
        parser.error("every size needs at least one URL a host: --hosts must not exceed --sizes")
    quotas, figures, stack = load_quotas(), measured(), stack_settings()
    if args.render:
        saved = json.loads(RESULTS.read_text(encoding="utf-8"))
        text = doc.render(
            saved["rows"], saved["fixed"], saved["advice"], saved["pushed"], stack, site_for(figures), figures, quotas,
            json.loads(CHECK.read_text(encoding="utf-8")) if CHECK.exists() else None, saved["argv"],
        )  # fmt: skip
        (ROOT / "docs" / "scale.md").write_text(text, encoding="utf-8")
        print(f"wrote docs/scale.md from {RESULTS.relative_to(ROOT)}")
        return 0
    if args.fetchers is not None:
        stack = replace(stack, fetcher_max_concurrency=args.fetchers)
    site = site_for(figures)
    grid = scenarios(tuple(args.sizes), tuple(args.hosts))

    def say(row: dict[str, Any]) -> None:
        print(json.dumps(row) if args.json else terminal([row]), flush=True)

    rows = run_grid(grid, stack, site, quotas, figures, before=not args.no_before, say=say, order=args.batch_order)
    if args.json:
        return 0
    check: dict[str, Any] | None = None
    if args.check:
        # The check runs the real local runner and demo sites (bench/): only when asked, never in `make test`.
        check = importlib.import_module("bench.scale_check").main([])
    if not args.no_docs and args.fetchers is None and args.batch_order == "interleaved":
        tips = advice(stack, site, quotas, figures, rows)
        push = pushed(stack, site, quotas, figures, say) if 100_000_000 in args.sizes else []
        # The 10M nights in message order, as a batch took its slots before: what the change bought.
        tens = [s for s in grid if s.urls == 10_000_000]
        fixed = run_grid(tens, stack, site, quotas, figures, before=False, say=say, order="by-message")
        argv_text = " ".join(sys.argv[1:] if argv is None else argv)
        saved = {"argv": argv_text, "rows": rows, "fixed": fixed, "advice": tips, "pushed": push}
        RESULTS.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
        text = doc.render(rows, fixed, tips, push, stack, site, figures, quotas, check, argv_text)
        (ROOT / "docs" / "scale.md").write_text(text, encoding="utf-8")
        print("wrote docs/scale.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

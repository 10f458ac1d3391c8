"""Turn a results file into numbers: derived ratios, target verdicts and docs/benchmarks.md.

``python -m bench.report [RESULTS.json]`` (``make bench-report ARGS=...``) rewrites docs/benchmarks.md
and the README's benchmark section (bench.publish) from a results file, by default the newest
``bench/results/bench-*.json`` of a whole run, without measuring anything.

A row measured in rounds (bench.rounds) is read as its median with its range: the verdicts compare
medians and say "within the spread" where Sluice's range and the peer's overlap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import rounds
from bench.common import ITEMS_PER_PAGE
from bench.rounds import WITHIN, Spread

Run = dict[str, Any]
DOCS = Path("docs/benchmarks.md")
RESULTS = Path("bench/results")
LATEST = RESULTS / "latest.json"
COMMAND = "make bench    # = .venv/bin/python -m bench.run"


def derive(run: Run, latency_ms: float) -> Run:
    """Add pages/s, CPU-ms per page, the latency and CPU limits and the ratios to them."""
    ok = run.get("pages_ok", 0)
    wall = run.get("wall_s", 0.0)
    out = dict(run)
    if not ok or not wall:
        return out
    n = run["concurrency"]
    pps = ok / wall
    cpu_ms = run["cpu_s"] * 1000 / ok
    latency_bound = n / (latency_ms / 1000) if latency_ms > 0 else float("inf")
    cpu_bound = 1000 / cpu_ms if cpu_ms > 0 else float("inf")
    limit = min(latency_bound, cpu_bound)
    out.update(
        pages_per_s=pps,
        cpu_ms_per_page=cpu_ms,
        latency_bound=latency_bound,
        cpu_bound=cpu_bound,
        limit=limit,
        ratio_latency=pps / latency_bound,
        ratio_limit=pps / limit,
        records_expected=ITEMS_PER_PAGE * run["pages_requested"],
        complete=ok == run["pages_requested"] and run["records"] == ITEMS_PER_PAGE * run["pages_requested"],
    )
    if run.get("variant") == "docs":  # one record per article, none on the 21 index pages
        out.update(records_expected=ok - 21, complete=run["records"] == ok - 21)
    return out


def find(runs: list[Run], client: str, concurrency: int, variant: str | None = None) -> Run | None:
    """The first complete-enough run of ``client`` at ``concurrency`` (and ``variant``), if any."""
    for run in runs:
        same = run.get("client") == client and run.get("concurrency") == concurrency
        if same and "cpu_ms_per_page" in run and (variant is None or run.get("variant") == variant):
            return run
    return None


PEERS = ("peer", "scrapy", "recipe")
"""aiohttp + selectolax (the best plain-Python peer), a Scrapy spider, the httpx + BeautifulSoup recipe."""
SHARE_PEER = "peer"
"""The peer whose share of the limit Sluice's is held against: aiohttp + selectolax (see ``comparison``)."""
VARIANTS = (("matrix", "50 KB listings"), ("heavy", "400 KB listings"), ("docs", "link-heavy docs"))
"""Where each page variant's runs are kept in a results file, and its name in the tables."""


def latency_of(result: dict[str, Any]) -> float:
    return float(result.get("config", {}).get("latency_ms", 50.0))


def spreads(run: Run, latency_ms: float) -> dict[str, Spread]:
    """A row's CPU-ms a page, share of its limit and pages/s over its rounds (median, lowest, highest)."""
    found: dict[str, Spread] = {}
    for name, field in (("cpu_ms", "cpu_ms_per_page"), ("share", "ratio_limit"), ("pps", "pages_per_s")):
        figure = rounds.spread(run, field, latency_ms)
        if figure is not None:
            found[name] = figure
    return found


def cpu_median(run: Run, latency_ms: float = 50.0) -> float:
    """A row's CPU-ms a page: the median over its rounds."""
    figure = rounds.spread(run, "cpu_ms_per_page", latency_ms)
    return figure.median if figure else float(run["cpu_ms_per_page"])


def comparison(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per page variant and concurrency: each client's share of its limit and CPU-ms a page (medians,
    with their ranges), and Sluice against the peers there: its CPU against the best peer's (the lowest
    median CPU of any peer) and its share of the limit against aiohttp + selectolax's; each the ratio
    of the medians and, in words, 'ahead', 'behind' or 'within the spread'.

    Shares are compared with aiohttp + selectolax only: a client's limit is the lower of N ÷ latency
    and its own 1000 ÷ CPU-ms, so a CPU-bound client (Scrapy, the recipe) sits near 1.00 of a limit set
    by its own slowness. Only the peer that, like Sluice, is bound by latency shares its limit."""
    latency = latency_of(result)
    rows = []
    for key, label in VARIANTS:
        runs: list[Run] = result.get(key, [])
        for n in sorted({r["concurrency"] for r in runs if "cpu_ms_per_page" in r}):
            clients = {c: find(runs, c, n) for c in ("sluice", *PEERS)}
            found = {c: spreads(r, latency) for c, r in clients.items() if r is not None}
            row: dict[str, Any] = {"variant": label, "key": key, "concurrency": n, **found}
            sluice = found.get("sluice")
            peers = [c for c in found if c != "sluice"]
            if sluice is not None and peers:
                row["best_cpu"] = min(peers, key=lambda c: found[c]["cpu_ms"].median)
                cpu = found[row["best_cpu"]]["cpu_ms"]
                row["cpu_vs_best"] = sluice["cpu_ms"].median / cpu.median
                row["cpu_verdict"] = rounds.compare(sluice["cpu_ms"], cpu, lower_is_better=True)
            if sluice is not None and SHARE_PEER in found:
                share = found[SHARE_PEER]["share"]
                row["share_vs_peer"] = sluice["share"].median / share.median
                row["share_verdict"] = rounds.compare(sluice["share"], share, lower_is_better=False)
            rows.append(row)
    return rows


def comparison_table(rows: list[dict[str, Any]]) -> list[str]:
    """The comparison as markdown: per client ÷ limit and CPU-ms/page as median (min–max), then
    Sluice ÷ the best peer (medians) and how it stands."""
    clients = [c for c in ("sluice", *PEERS) if any(c in row for row in rows)]
    head = " | ".join(f"{c} ÷ limit | {c} CPU-ms/p" for c in clients)
    lines = [
        f"| pages | in flight | {head} | sluice CPU ÷ best peer | sluice share ÷ aiohttp + selectolax's |",
        "|---|---:|" + "---:|" * (2 * len(clients) + 2),
    ]
    for row in rows:
        cells = []
        for client in clients:
            figures = row.get(client)
            cells += [figures["share"].text(), figures["cpu_ms"].text()] if figures else ["–", "–"]
        lines.append(
            f"| {row['variant']} | {row['concurrency']} | {' | '.join(cells)} |"
            f" {ratio_text(row.get('cpu_vs_best'), row.get('cpu_verdict'))} |"
            f" {ratio_text(row.get('share_vs_peer'), row.get('share_verdict'))} |"
        )
    return lines


def ratio_text(value: float | None, verdict: str | None) -> str:
    """'0.98, ahead' / '1.04, within the spread'."""
    return _num(value) if value is None or verdict is None else f"{_num(value)}, {verdict}"


def cpu_ratios(runs: list[Run], latency_ms: float = 50.0) -> list[dict[str, Any]]:
    """Per concurrency: Sluice's median CPU per page as a fraction of each peer's."""
    rows = []
    for n in sorted({r["concurrency"] for r in runs if r.get("client") == "sluice"}):
        sluice = find(runs, "sluice", n)
        if sluice is None:
            continue
        row: dict[str, Any] = {"concurrency": n}
        for peer in PEERS:
            other = find(runs, peer, n)
            if other is not None:
                row[f"vs_{peer}"] = cpu_median(sluice, latency_ms) / cpu_median(other, latency_ms)
        rows.append(row)
    return rows


def _verdict(
    name: str, value: float | None, goal: float, above: bool, unit: str, words: list[str] | None = None
) -> dict[str, Any]:
    """PASS or MISS by ``value``; with ``words`` (each cell's 'ahead', 'behind' or 'within the spread'
    from its rounds), MISS only where a cell is clearly behind, else 'within the spread' where a
    cell's range reaches the goal, else PASS."""
    check = {"target": name, "value": value, "goal": goal, "sign": "≥" if above else "≤", "unit": unit}
    if value is None:
        return {**check, "verdict": "NOT RUN"}
    if words is not None:
        verdict = "MISS" if "behind" in words else WITHIN if WITHIN in words else "PASS"
        return {**check, "verdict": verdict}
    passed = value >= goal if above else value <= goal
    return {**check, "verdict": "PASS" if passed else "MISS"}


def _against_goal(figures: dict[int, Spread], goal: float, above: bool) -> list[str]:
    """Each cell's median against a goal, 'within the spread' when its range reaches the goal."""
    point = Spread(goal, goal, goal)
    return [rounds.compare(f, point, lower_is_better=not above) for f in figures.values()]


def _sluice_spreads(runs: list[Run], field: str, latency_ms: float) -> dict[int, Spread]:
    found: dict[int, Spread] = {}
    for run in runs:
        figure = rounds.spread(run, field, latency_ms) if run.get("client") == "sluice" else None
        if figure is not None:
            found.setdefault(int(run["concurrency"]), figure)
    return found


def _detail(values: dict[int, float]) -> str:
    return ", ".join(f"{v:.2f} at {n}" for n, v in sorted(values.items()))


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The project's performance targets, each with the measured median and PASS/MISS, or 'within the
    spread' where the rounds' range reaches the goal or the peer's range."""
    latency = latency_of(result)
    runs: list[Run] = result.get("matrix", [])
    checks = []
    shares = _sluice_spreads(runs, "ratio_limit", latency)
    for n, goal in ((32, 0.9), (128, 0.7)):
        figure = shares.get(n)
        words = _against_goal({n: figure}, goal, True) if figure else None
        value = figure.median if figure else None
        checks.append(_verdict(f"sluice pages/s ÷ limit at {n} in flight", value, goal, True, "×", words))
    vs_scrapy = {row["concurrency"]: row["vs_scrapy"] for row in cpu_ratios(runs, latency) if "vs_scrapy" in row}
    for key, size, goal in (("matrix", "50 KB", 1.2), ("heavy", "400 KB", 2.0)):
        cpu = _sluice_spreads(result.get(key, []), "cpu_ms_per_page", latency)
        medians = {n: f.median for n, f in cpu.items()}
        name = f"sluice CPU-ms per {size} page (worst concurrency)"
        check = _verdict(name, max(medians.values(), default=None), goal, False, "ms", _against_goal(cpu, goal, False))
        checks.append({**check, "detail": _detail(medians)})
        if key == "matrix":
            worst = max(vs_scrapy.values(), default=None)
            check = _verdict("sluice CPU ÷ Scrapy CPU per page (worst concurrency)", worst, 0.25, False, "×")
            checks.append({**check, "detail": _detail(vs_scrapy)})
    rows = comparison(result)
    for _, label in VARIANTS:
        for name, field, whose, above in (
            ("CPU-ms a page", "cpu_vs_best", "the best peer's", False),
            ("share of the limit", "share_vs_peer", "aiohttp + selectolax's", True),
        ):
            mine = [r for r in rows if r["variant"] == label and field in r]
            values = {r["concurrency"]: r[field] for r in mine}
            words = [r["cpu_verdict" if field == "cpu_vs_best" else "share_verdict"] for r in mine]
            worst = (min if above else max)(values.values(), default=None)
            title = f"sluice {name} ÷ {whose}, {label} (medians, worst concurrency)"
            check = _verdict(title, worst, 1.0, above, "×", words)
            checks.append({**check, "detail": _detail(values)})
    checks += pipeline_targets(result.get("pipeline", []))
    heavy = find(result.get("heavy", []), "sluice", 128)
    checks.append(
        _verdict(
            "sluice peak RSS, heavy pages, 128 in flight", heavy["peak_rss_mb"] if heavy else None, 100.0, False, "MB"
        )
    )
    return checks


def pipeline_run(runs: list[Run], size: int | str, client: str, variant: str) -> Run | None:
    for run in runs:
        if (
            run.get("size") == size
            and run.get("client") == client
            and run.get("variant") == variant
            and "pages_per_s" in run
        ):
            return run
    return None


def pipeline_pps(run: Run) -> Spread:
    """A pipeline row's pages/s over its rounds (median, lowest, highest); one value when it ran once."""
    return rounds.spread(run, "pages_per_s", 50.0) or Spread.of([float(run["pages_per_s"])])


def pipeline_ratio(run: Run, crawl: Run) -> Spread:
    """sluice run's pages/s ÷ the engine's: the ratio of the medians, and the lowest and highest ratio
    their rounds allow (slowest run ÷ fastest engine, fastest run ÷ slowest engine)."""
    mine, engine = pipeline_pps(run), pipeline_pps(crawl)
    return Spread(mine.median / engine.median, mine.low / engine.high, mine.high / engine.low)


def pipeline_targets(runs: list[Run]) -> list[dict[str, Any]]:
    """sluice run against sluice crawl on the same spec (medians of their alternating rounds, 'within
    the spread' where the rounds' range of the ratio reaches the goal), and its memory, at each size."""
    checks = []
    sizes = sorted({r["size"] for r in runs if isinstance(r.get("size"), int)})
    for size in [*sizes, "docs"]:
        crawl = pipeline_run(runs, size, "sluice", "docs" if size == "docs" else "default")
        run = pipeline_run(runs, size, "pipeline", "docs" if size == "docs" else "first")
        where = "link-heavy docs site" if size == "docs" else f"{size:,} listing pages"
        ratio = pipeline_ratio(run, crawl) if run and crawl else None
        # Issue 18: on one host the pipeline keeps fetching while it writes, so it stays within 0.8 of the engine.
        name = f"sluice run ÷ sluice crawl pages/s, {where}"
        words = _against_goal({0: ratio}, 0.8, True) if ratio else None
        check = _verdict(name, ratio.median if ratio else None, 0.8, True, "×", words)
        checks.append({**check, "detail": f"{ratio.low:.2f}–{ratio.high:.2f} over the rounds"} if ratio else check)
    peaks = [r["peak_rss_mb"] for r in runs if r.get("client") == "pipeline" and "peak_rss_mb" in r]
    checks.append(_verdict("sluice run peak RSS (every run)", max(peaks, default=None), 300.0, False, "MB"))
    if len(sizes) >= 2:
        small, large = (
            pipeline_run(runs, sizes[0], "pipeline", "first"),
            pipeline_run(runs, sizes[-1], "pipeline", "first"),
        )
        if small and large:
            per_page = pipeline_pps(small).median / pipeline_pps(large).median
            growth = (large["peak_rss_mb"] - small["peak_rss_mb"]) / max(1.0, small["peak_rss_mb"])
            checks.append(
                _verdict(f"sluice run time per page, {sizes[-1]:,} ÷ {sizes[0]:,} pages", per_page, 1.25, False, "×")
            )
            checks.append(
                _verdict(f"sluice run peak RSS growth, {sizes[0]:,} → {sizes[-1]:,} pages", growth, 0.25, False, "×")
            )
    return checks


def pipeline_rounds_sentence(pcfg: dict[str, Any]) -> str:
    """How the pipeline rows were measured: the engine and a first run in alternating rounds, or once."""
    n = int(pcfg.get("rounds", 1))
    if n <= 1:
        return "Each row is one run."
    return (
        f"The engine and a first `sluice run` ran in {n} alternating rounds at each size (A B, B A, ...), so"
        " the machine's drift hits both alike: pages/s and CPU-ms a page are medians (lowest–highest), and"
        " ÷ sluice crawl is the ratio of the medians; the nightly run and Scrapy ran once."
    )


def pipeline_table(runs: list[Run]) -> str:
    rows = [
        "| pages | client | rounds | pages/s | ÷ sluice crawl (medians) | CPU-ms/page | peak RSS MB | notes |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    names = {
        ("sluice", "default"): "sluice crawl (engine alone)",
        ("sluice", "docs"): "sluice crawl (engine alone)",
        ("pipeline", "first"): "sluice run, first run",
        ("pipeline", "nightly"): "sluice run, nightly (all 304)",
        ("pipeline", "docs"): "sluice run, first run",
        ("scrapy_stateful", "batched"): "Scrapy + JOBDIR + SQLite upserts",
    }
    for run in runs:
        size = run.get("size")
        crawl = pipeline_run(runs, size if size is not None else -1, "sluice", "docs" if size == "docs" else "default")
        name = names.get((run.get("client", ""), run.get("variant", "")), f"{run.get('client')} {run.get('variant')}")
        label = "docs site (2,021)" if size == "docs" else f"{size:,}"
        if "pages_per_s" not in run:
            rows.append(f"| {label} | {name} | – | – | – | – | – | {run.get('error', '')} |")
            continue
        ratio = pipeline_ratio(run, crawl).median if crawl else None
        notes = "; ".join(n for n in run.get("notes", []) if not n.startswith("transport"))
        cpu = rounds.spread(run, "cpu_ms_per_page", 50.0) or Spread.of([float(run["cpu_ms_per_page"])])
        rows.append(
            f"| {label} | {name} | {len(rounds.samples(run, 50.0))} | {pipeline_pps(run).text(0)} | {_num(ratio)} |"
            f" {cpu.text()} | {run['peak_rss_mb']:.0f} | {notes} |"
        )
    return "\n".join(rows)


def finalizer_section(found: dict[str, Any]) -> list[str]:
    """Finalizing by size, and the same per-page figures multiplied out for a million pages."""
    lines = [
        "## Finalizing, by run size (local store)",
        "",
        "`python -m bench.finalize_scale`: real runs of the listing crawl, a first run (records from this run's",
        "parts) and a nightly run (every page a 304, records reused from the first run's output); only the",
        "finalizer is measured: scans of the run's URLs, range reads, bytes read and written, wall time, and",
        "how far the process's resident memory rose while it ran.",
        "",
        "| pages | run | finalize s | ms / page | scans | range reads | read / page | written / page | RSS rise |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    largest: dict[str, Any] = {}
    for pages, runs in sorted(found.items(), key=lambda kv: int(kv[0])):
        for run, f in runs.items():
            largest[run] = f
            scans, reads = f["calls"].get("frontier.scan", 0), f["calls"].get("objects.get_range", 0)
            lines.append(
                f"| {int(pages):,} | {run} | {f['wall_s']:.2f} | {f['ms_per_page']:.3f} | {scans} |"
                f" {reads:,} | {f['bytes_read_per_page']:,.0f} B |"
                f" {f['bytes_written_per_page']:,.0f} B | {f['rss_rise_mb']:.0f} MB |"
            )
    first = largest.get("first", {})
    if first:
        per_page_mb = first["rss_rise_mb"] / max(1, first["pages"])
        moved_gb = (first["bytes_read_per_page"] + first["bytes_written_per_page"]) * 1e6 / 2**30
        lines += [
            "",
            "For a million pages, the same per-page figures: "
            f"{first['ms_per_page'] * 1e6 / 1000:,.0f} s of the finalizer's own work, {moved_gb:,.1f} GB read and"
            f" written; on Lambda add S3 transfer at 100 MB/s (~{moved_gb * 1024 / 100:,.0f} s) and two DynamoDB"
            " scans of ~700 MB (~1,400 1 MB pages at ~30 ms: ~45 s), spread over the run's shards. Memory does not"
            ' scale this way on Lambda: each shard task is its own invocation (see "Finalizing in shards" below'
            " for the largest task's peak). The local store runs every shard task in this one process, in shards of"
            " at most 2,500 pages, two at a time (`sluice_tools.runner.local`), so its RSS rise stays near two such"
            f" tasks' whatever the run's size: {first['rss_rise_mb']:.0f} MB at {first['pages']:,} pages here"
            f" ({per_page_mb * 1024:,.1f} KB a page of the run).",
            "",
        ]
    return lines


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def run_row(run: Run, latency_ms: float = 50.0) -> str:
    """One markdown table row for a client in a cell: pages/s, CPU-ms a page and the share of the limit
    as median (min–max) over its rounds, the rest from its median run."""
    cells = [str(run.get("client")), str(run.get("variant") or ""), str(run.get("concurrency"))]
    if "cpu_ms_per_page" not in run:
        cells += [f"failed: {run.get('error', '?')}", *[""] * 11]
    else:
        figures = spreads(run, latency_ms)
        cells += [
            str(len(rounds.samples(run, latency_ms))),
            f"{run['pages_ok']:,}",
            _num(run["wall_s"]),
            figures["pps"].text(0),
            figures["cpu_ms"].text(),
            _num(run["limit"], 0),
            _num(run["ratio_latency"]),
            figures["share"].text(),
            f"{run['peak_rss_mb']:.0f} ({run.get('rss_before_mb', 0):.0f})",
            f"{run['records']:,}" + ("" if run["complete"] else " ⚠"),
            _num(run.get("server_cpu_pct"), 0),
            _num(run.get("other_cpu_pct"), 0),
        ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| client | variant | in flight | rounds | pages ok | wall s | pages/s | CPU-ms/page | limit pages/s "
    "| ÷ N/latency | ÷ limit | peak RSS MB (at start) | records | server CPU % | others CPU % |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def table(runs: list[Run], latency_ms: float = 50.0) -> str:
    return "\n".join([HEADER, *(run_row(r, latency_ms) for r in runs)])


def rounds_method(result: dict[str, Any]) -> list[str]:
    """How the cells were measured: in alternating rounds, or (an older file) Sluice's repeats alone."""
    cfg = result["config"]
    counts = {k: v for k, v in (cfg.get("rounds") or {}).items() if result.get(k)}
    if not cfg.get("rounds"):
        return [
            f"- **Repeats** (a file from before rounds): each Sluice cell is the median (by CPU per page) of"
            f" {cfg.get('sluice_repeats', 1)}",
            "  runs, the lowest and highest in brackets; the peers ran once, after Sluice.",
        ]
    names = (("matrix", "on 50 KB pages"), ("heavy", "on 400 KB pages"), ("docs", "on the docs site"))
    said = ", ".join(f"{counts[k]} {where}" for k, where in names if k in counts)
    return [
        "- **Rounds**: Sluice and the peer (aiohttp + selectolax) are measured in alternating rounds, A B, B A,",
        "  A B, ..., so that the machine's drift hits both alike:",
        f"  {said}. Scrapy and the recipe run once a cell. *pages/s*, *CPU-ms/page* and *÷ limit* are the",
        "  median over the rounds with the lowest and highest in brackets; the other columns are the median",
        "  run's (by CPU a page). Sluice is judged against a peer by the medians, and *within the spread* where",
        "  the two ranges overlap.",
    ]


def markdown(result: dict[str, Any]) -> str:
    """The whole docs/benchmarks.md."""
    cfg = result["config"]
    lat = float(cfg["latency_ms"])
    machine = result["machine"]
    pk = machine["packages"]
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench.run` (or `python -m bench.report`, `make bench-report`): edit",
        "bench/report.py instead. Sections after the generated ones (many hosts, finalizing in shards, fan-out)",
        "are written by their own commands and kept when this page is regenerated. -->",
        "",
        "How fast Sluice crawls, and how much CPU and memory it spends per page, next to what a user",
        "would otherwise reach for: aiohttp + selectolax written carefully (the best plain-Python peer),",
        "a Scrapy spider, and the common asyncio + httpx + BeautifulSoup recipe.",
        "",
        "## Method",
        "",
        f"- **Site**: the bundled demo catalogue (`sluice_tools.demosite`), {cfg['pages']:,} listing pages of 20",
        "  `article.product_pod` cards (~50 KB each, ~10 KB gzipped; every client asks for gzip),",
        f"  {cfg['latency_ms']:g} ms of added latency per response, pages pre-rendered before the clock starts.",
        "  The server runs in its own process pinned to core 1; every client runs in its own fresh process",
        "  pinned to core 0.",
        "- **Work per page**: fetch, decode, and extract four fields of each of the 20 cards (title, absolute url,",
        "  price as a number, star rating). A run counts only if every page was fetched and records = 20 × pages",
        "  (the *records* column; ⚠ marks a run that fell short).",
        "- **sluice**: `Crawl` + `PageFetcher` (the engine's own path: frontier, fetch, charset decode, lexbor",
        "  extraction, a counting sink), seeds from a template + range, concurrency = per-domain concurrency = N,",
        "  robots off, no delay. **scrapy**: one spider in `CrawlerProcess`, `CONCURRENT_REQUESTS` =",
        "  `CONCURRENT_REQUESTS_PER_DOMAIN` = N, AutoThrottle, robots.txt and the HTTP cache off, `response.css`.",
        '  **recipe**: `httpx.AsyncClient(limits=N)` + `asyncio.Semaphore(N)` + `BeautifulSoup(html, "lxml")`.',
        "  **peer**: `aiohttp.ClientSession` + `TCPConnector(limit=N)` + `asyncio.Semaphore(N)` + selectolax's",
        "  `LexborHTMLParser` (the parser Sluice uses), `urljoin` for URLs: the best plain-Python peer.",
        "- **Measured** around the crawl only (not imports or start-up): wall time, process CPU time (user + system,",
        "  all threads), and peak RSS (`ru_maxrss`, whole process; in brackets, the peak when the crawl",
        "  started, i.e. the interpreter and imports).",
        *rounds_method(result),
        "- **limit** = min(N ÷ latency, 1000 ÷ CPU-ms per page): the latency bound or the client's own",
        "  single-core CPU bound, whichever is lower. *÷ N/latency* and *÷ limit* are pages/s over each.",
        "  *server CPU %* is the server's busy share of one core during the run (near 100 % would mean",
        "  the server, not the client, was the bottleneck). *others CPU %* is what every other process on the",
        "  machine used meanwhile (% of one core, over the client process's life): this is a shared 2-core",
        "  machine, and a high figure there makes that row's numbers less trustworthy.",
        "",
        f"## Results ({cfg['pages']:,} pages, {cfg['latency_ms']:g} ms latency)",
        "",
        table(result.get("matrix", []), lat),
        "",
    ]
    ratios = cpu_ratios(result.get("matrix", []), lat)
    if ratios:
        lines += [
            "CPU per page, Sluice's median as a fraction of the peer's (lower is better):",
            "",
            "| in flight | sluice ÷ aiohttp + selectolax | sluice ÷ scrapy | sluice ÷ recipe |",
            "|---:|---:|---:|---:|",
        ]
        lines += [f"| {r['concurrency']} | " + " | ".join(_num(r.get(f"vs_{p}")) for p in PEERS) + " |" for r in ratios]
        lines.append("")
    if result.get("heavy"):
        hcfg = result["config"]["heavy"]
        lines += [
            f"## Heavy pages (~400 KB, {hcfg['pages']:,} pages)",
            "",
            "The same listings with a real shop's markup: every card carries icons (inline SVG), action",
            "buttons, a spec list with data-* attributes and a long description; ~400 KB and ~4,600 tags a page.",
            "",
            table(result["heavy"], lat),
            "",
        ]
    if result.get("docs"):
        lines += [
            "## Link-heavy pages (the docs site, 2,021 pages, 200+ links each)",
            "",
            "Crawled from its index as crawls/demo-docs.yaml says: every link of the navigation and the body",
            "resolved, canonicalized, judged in scope (allow and deny patterns) and deduplicated, and four fields",
            "of each article. The peer does the same with `urljoin`, w3lib's `canonicalize_url` and a set.",
            "",
            table(result["docs"], lat),
            "",
        ]
    rows = comparison(result)
    if rows:
        lines += [
            "## Sluice against the best peer, per page variant",
            "",
            "For each client, pages/s as a share of its limit (higher is better) and CPU-ms a page (lower is",
            "better), median (min–max); then Sluice's median CPU over the lowest peer median, and Sluice's median",
            "share over the highest peer median: *ahead* or *behind*, or *within the spread* where the two",
            "clients' ranges overlap.",
            "",
            *comparison_table(rows),
            "",
        ]
    if result.get("transports"):
        lines += [
            f"## Transports (sluice, {result['config']['transport_concurrency']} in flight, 50 KB pages)",
            "",
            "*default* is what PageFetcher uses when given no transport; the others are the options in",
            "`sluice.fetch.transport`, built with the limits PageFetcher would use.",
            "",
            table(result["transports"], lat),
            "",
        ]
    if result.get("pipeline"):
        pcfg = result["config"].get("pipeline", {})
        lines += [
            f"## The pipeline on one machine ({pcfg.get('concurrency', 32)} in flight,"
            f" {cfg['latency_ms']:g} ms latency)",
            "",
            "`sluice run` on the local store (SQLite and files, durable after every batch, resumable) beside the",
            "engine alone (`sluice crawl`, an in-memory frontier and a JSON Lines file) and the seed's stateful",
            "recipe (Scrapy with `JOBDIR` and an item pipeline upserting into SQLite, committing every 100 items),",
            "each doing the same work: the listing pages, four fields per card. The nightly run is a second run",
            'over the first one\'s state (every page asked "changed since?", records reused). The docs site is',
            "the demo site's link-heavy variant: 2,021 pages, 200+ in-scope links each, crawled from its index.",
            pipeline_rounds_sentence(pcfg),
            "",
            pipeline_table(result["pipeline"]),
            "",
        ]
        if result.get("pipeline_from"):
            source = result["pipeline_from"]
            lines += [f"(From `{source['file']}`, {source['started']}: {source['why']}.)", ""]
    if result.get("finalizer") and "error" not in result["finalizer"]:
        lines += finalizer_section(result["finalizer"])
    if result.get("breakdown"):
        std, heavy = result["breakdown"].get("standard", {}), result["breakdown"].get("heavy", {})
        lines += [
            "## Where Sluice's CPU goes",
            "",
            "`python -m bench.breakdown` times each offline step of the per-page path on one rendered page",
            "(best of 5, CPU µs). What a crawl's CPU-ms per page has beyond extraction, decoding and hashing",
            "is fetching: httpx over the aiohttp transport, PageFetcher's bookkeeping, asyncio and the engine.",
            "",
            "| step | ~50 KB page µs | ~400 KB page µs |",
            "|---|---:|---:|",
            *(f"| {k} | {v:,.0f} | {heavy.get(k, 0):,.0f} |" for k, v in std.items()),
            "",
        ]
        links = result["breakdown"].get("links", {})
        if links:
            lines += [
                "Links, on a page of the docs variant (every href resolved and canonicalized, best of 5):",
                "",
                "| step | value |",
                "|---|---:|",
                *(f"| {k} | {v:,.2f} |" for k, v in links.items()),
                "",
            ]
    lines += ["## Targets", "", "| target | goal | measured | verdict |", "|---|---:|---:|---|"]
    for c in targets(result):  # judged again: a file's own verdicts are those of the code that wrote it
        goal = f"{c['sign']} {c['goal']:g} {c['unit']}"
        detail = f" ({c['detail']})" if c.get("detail") else ""
        lines.append(f"| {c['target']} | {goal} | {_num(c['value'])} {c['unit']}{detail} | **{c['verdict']}** |")
    noisy = [r for r in _all_runs(result) if r.get("other_cpu_pct", 0) > 10]
    lines += [""]
    if noisy:
        lines += [
            f"Note: {len(noisy)} run(s) shared the machine with other busy processes (over 10 % of a core",
            "on average); their numbers are less trustworthy.",
            "",
        ]
    lines += [
        "## Machine",
        "",
        f"{machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gb']} GB, {machine['os']}, "
        f"{machine['implementation']} {machine['python']}; commit {machine['commit']}, {result['started']}.",
        "",
        "Packages: " + ", ".join(f"{k} {v}" for k, v in pk.items()) + ".",
        "",
        "## Reproduce",
        "",
        "```",
        COMMAND,
        ".venv/bin/python -m bench.run --quick   # ~1 minute smoke run",
        "make bench-report ARGS=bench/results/bench-YYYYMMDD-HHMMSS.json   # rewrite the docs, measure nothing",
        ".venv/bin/python -m bench.run --pages 500 --latency-ms 20 --clients sluice,scrapy",
        "```",
        "",
        "Results land in `bench/results/bench-YYYYMMDD-HHMMSS.json` and `bench/results/latest.json`;",
        "`python -m bench.report [FILE]` rewrites this page and the README's table (between its",
        "`bench:start` and `bench:end` markers) from a results file, the newest whole run's by default, keeping",
        "the sections other commands appended here. The A/B measurements made by hand while",
        "building the engine (fetching while writing, letting a host go, worker processes) are in",
        "[engine-experiments.md](engine-experiments.md), which this command never rewrites.",
        "",
    ]
    return "\n".join(lines)


def _all_runs(result: dict[str, Any]) -> list[Run]:
    return [
        *result.get("matrix", []),
        *result.get("heavy", []),
        *result.get("docs", []),
        *result.get("transports", []),
    ]


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """Targets as console lines."""
    return [
        f"  {c['verdict']:7} {c['target']}: {_num(c['value'])} {c['unit']} (goal {c['sign']} {c['goal']:g})"
        + (f" [{c['detail']}]" if c.get("detail") else "")
        for c in result.get("targets", [])
    ]


def main(argv: list[str] | None = None) -> None:
    """Rewrite docs/benchmarks.md and the README's benchmark section from a results file."""
    from bench import publish  # publish builds on this module

    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or any(a.startswith("-") for a in args):
        sys.exit("usage: python -m bench.report [bench/results/bench-YYYYMMDD-HHMMSS.json]  (default: the newest)")
    path = Path(args[0]) if args else publish.newest_result()
    result = json.loads(path.read_text())
    publish.publish(result, publish.source_name(path))
    print(f"wrote {publish.README} and {DOCS} from {path}")


if __name__ == "__main__":
    main()

"""docs/costs.md, written from `make cost`'s measurements (never by hand: edit this file and rerun)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from infra.monitoring import ALARMS_PER_CRAWL, PIPELINE_ALARMS

from bench import egress_cost, parquet_copy_cost
from bench.finalize_gets_doc import finalize_gets_section
from sluice.domain.cost import PriceList
from sluice.metrics import RunMetric
from sluice_tools.meter.fit import slope, small_for

POLLING_USD = 0.26 + 0.21
"""Idle long polls of the two event sources: about 5 pollers x 3 a minute x 43,200 minutes x $0.50 per million
(the frontier, FIFO), and as many at $0.40 per million (the finalize shards' standard queue)."""

MILLION = 1_000_000
BATCH_URLS = 100
"""URLs per fetcher invocation: 10 messages of 10 URLs (the event source's batch size)."""
AWS_CALL_S = 0.010
"""Stated: one DynamoDB, S3 or SQS call from Lambda in the same region (p50 is well under this)."""
SEQUENTIAL_CALLS_PER_BATCH = 14
"""Calls a batch makes one after another: the run, the part, the claims, 7 rounds of 16 result writes,
the progress report and the drain check; the rest run in parallel with them."""
LOOKUPS_IN_FLIGHT = 16
"""The frontier's pool: a batch's reads of linking pages' results go out this many at a time."""
S3_BYTES_PER_S = 100 * 1024 * 1024
"""Stated: what one finalizer moves to and from S3 with 8 ranges in flight."""
TARGETS = {
    "demo crawl, first run": 1.50,
    "demo crawl, nightly (2% of pages changed)": 1.00,
}
LINES = (
    ("dynamodb_writes", "DynamoDB writes"),
    ("dynamodb_reads", "DynamoDB reads"),
    ("s3_put_class", "S3 PUT-class"),
    ("s3_get_class", "S3 GET-class"),
    ("sqs", "SQS"),
    ("lambda_compute", "Lambda compute"),
    ("lambda_requests", "Lambda requests"),
    ("logs", "CloudWatch Logs"),
    ("athena_scan", "Athena scan (Parquet copy)"),
)


def lambda_model(report: dict[str, Any], scenario: dict[str, Any], concurrency: int) -> dict[str, float]:
    """GB-seconds per million pages at the stated latency, the spec's concurrency and the stack's memory."""
    memory = report["memory_mb"]
    latency = report["site_latency_ms"] / 1000
    per_page_fraction = MILLION / max(1, scenario["pages"])
    # A batch's reads of its pages' linking pages (page types with carried data) go out 16 at a time.
    lookups = scenario.get("linking_page_lookups", 0) * per_page_fraction
    lookups_per_batch = lookups / (MILLION / BATCH_URLS)
    batch_s = (
        math.ceil(BATCH_URLS / concurrency) * latency
        + SEQUENTIAL_CALLS_PER_BATCH * AWS_CALL_S
        + math.ceil(lookups_per_batch / LOOKUPS_IN_FLIGHT) * AWS_CALL_S
    )
    fetcher = MILLION / BATCH_URLS * batch_s * memory["fetcher"] / 1024
    calls = scenario["calls"]
    sends = calls.get("sqs.SendMessageBatch", 0) * per_page_fraction
    queries = calls.get("dynamodb.Query", 0) * per_page_fraction - lookups  # the scans of the run's URLs
    scheduler = (sends / 8 * 2 * AWS_CALL_S + queries / 2 * 2 * AWS_CALL_S) * memory["scheduler"] / 1024
    moved = (scenario["s3"]["bytes_up"] + scenario["s3"]["bytes_down"]) * per_page_fraction
    finalizer = (queries / 2 * 2 * AWS_CALL_S + moved / S3_BYTES_PER_S) * memory["finalizer"] / 1024
    return {"fetcher": fetcher, "scheduler": scheduler, "finalizer": finalizer, "batch_s": batch_s}


def run_lines(report: dict[str, Any], scenario: dict[str, Any], concurrency: int) -> dict[str, float]:
    """Dollars a run spent per line, as metered, but Lambda compute from :func:`lambda_model` over the run's pages
    and without the Parquet copy's scan (billed a query at a time: :func:`parquet_copy_cost.at_pages`)."""
    lines = {key: float(scenario["cost"].get(key, 0.0)) for key, _ in LINES if key != "athena_scan"}
    model = lambda_model(report, scenario, concurrency)
    gb_s = model["fetcher"] + model["scheduler"] + model["finalizer"]
    lines["lambda_compute"] = gb_s * report["prices"]["lambda_per_gb_s"] * scenario["pages"] / MILLION
    return lines


def fit(
    small_pages: int, small_lines: dict[str, float], large_pages: int, large_lines: dict[str, float]
) -> dict[str, dict[str, float]]:
    """A straight line through two runs of the same scenario, per line: ``per_million`` (the slope, dollars a
    million pages) and ``fixed`` (the intercept, dollars a run whatever its size). Scaling one run instead would
    count its fixed part once a run's worth of pages, a million pages' worth of times. The slope is
    :func:`sluice_tools.meter.fit.slope`'s, as the scale model's (an error on no span, a warning when negative)."""
    fitted: dict[str, dict[str, float]] = {"per_million": {}, "fixed": {}}
    for key, large in large_lines.items():
        per_page = slope(small_pages, small_lines.get(key, 0.0), large_pages, large, what=key)
        fitted["per_million"][key] = per_page * MILLION
        fitted["fixed"][key] = large - per_page * large_pages
    return fitted


def _model_slope(report: dict[str, Any], scenario: dict[str, Any], concurrency: int) -> dict[str, float]:
    """:func:`lambda_model`'s GB-s a million pages, the slope between the two sizes (the scans a run makes once
    not counted a million pages' worth of times)."""
    small = small_for(report, scenario["label"])
    if small is None:
        return {}

    def run_gb_s(s: dict[str, Any]) -> dict[str, float]:
        model = lambda_model(report, s, concurrency)
        return {key: model[key] * s["pages"] / MILLION for key in ("fetcher", "scheduler", "finalizer")}

    fitted = fit(int(small["pages"]), run_gb_s(small), int(scenario["pages"]), run_gb_s(scenario))["per_million"]
    return fitted


def per_million(report: dict[str, Any], scenario: dict[str, Any], concurrency: int) -> dict[str, dict[str, float]]:
    """Per line and in total: ``per_million`` (the slope), ``fixed`` (a run's intercept) and ``run`` (what a run
    of a million pages costs: the two added, the copy's scan billed at that run's size). Without a smaller run
    the line goes through nothing (a report from before two sizes were measured)."""
    small = small_for(report, scenario["label"])
    small_pages = 0 if small is None else int(small["pages"])
    small_lines = {} if small is None else run_lines(report, small, concurrency)
    fitted = fit(small_pages, small_lines, int(scenario["pages"]), run_lines(report, scenario, concurrency))
    prices = PriceList(**report["prices"])
    # Billed by the query, 10 MB at least: the run's fixed part holds none of it, a million pages all of it.
    copy = parquet_copy_cost.at_pages(scenario, small, MILLION)
    fitted["per_million"]["athena_scan"] = parquet_copy_cost.price(copy, prices=prices) if copy else 0.0
    fitted["fixed"]["athena_scan"] = 0.0
    fitted["run"] = {key: fitted["fixed"][key] + fitted["per_million"][key] for key, _ in LINES}
    for part in fitted.values():
        part["total"] = sum(part[key] for key, _ in LINES)
    return fitted


def _copy_source(report: dict[str, Any]) -> list[str]:
    """Where the copy's scan came from when it was measured apart from the rest (a report from before the copy
    was priced, completed by a smaller run of the same scenarios): said, never blended silently."""
    source = report.get("parquet_copy_from")
    if source is None:
        return []
    return [
        f"These scans were measured by `{source['command']}`",
        f"({source['when']}): the same scenarios on fewer pages, added to the report of the run above",
        f"({report['when']}); every other figure on this page is that run's.",
    ]


def _copy_rows(report: dict[str, Any], scenarios: list[dict[str, Any]]) -> list[str]:
    rows = []
    for s in scenarios:
        copy = s.get("parquet_copy", {})
        queries, pages = copy.get("queries", []), copy.get("pages", s["pages"])
        scanned = sum(q["scanned_bytes"] for q in queries)
        prices = PriceList(**report["prices"])
        at_a_million = parquet_copy_cost.at_pages(s, small_for(report, s["label"]), MILLION)
        scanned_at_a_million = sum(q["scanned_bytes"] for q in at_a_million)
        rows.append(
            f"| {s['label']} | {pages:,} | {len(queries)} | {scanned:,} bytes | {scanned_at_a_million / MILLION:,.0f} |"
            f" ${parquet_copy_cost.price(queries, prices=prices):.5f} |"
            f" {_usd(parquet_copy_cost.price(at_a_million, prices=prices) if queries else 0.0)} |"
        )
    return rows


def _once_calls(report: dict[str, Any], scenarios: list[dict[str, Any]], operations: list[str]) -> list[str]:
    """The calls a run makes whatever its size: each operation's intercept between the two sizes measured."""
    pairs = [(s, small_for(report, s["label"])) for s in scenarios]
    if any(small is None for _, small in pairs):
        return []
    out = [
        "",
        "Of those, the calls a run makes whatever its size (each operation's intercept between the two sizes; a",
        "fraction or a negative count is noise: calls a page that varied between the two runs):",
        "",
        "| operation | " + " | ".join(s["label"] for s in scenarios) + " |",
        "|---|" + "---:|" * len(scenarios),
    ]
    for op in operations:
        cells = []
        for large, small in pairs:
            assert small is not None
            fitted = fit(
                int(small["pages"]),
                {op: small["calls"].get(op, 0)},
                int(large["pages"]),
                {op: large["calls"].get(op, 0)},
            )
            cells.append(f"{fitted['fixed'][op]:,.1f}")
        out.append(f"| `{op}` | " + " | ".join(cells) + " |")
    return out


def _price(value: float) -> str:
    return "$" + f"{value:.10f}".rstrip("0").rstrip(".")


def _line_table(
    scenarios: list[dict[str, Any]], million: dict[str, Any], part: str, money: Callable[[float], str]
) -> list[str]:
    """A table of each cost line across the scenarios, and their total: ``part`` is ``per_million`` or ``fixed``."""
    out = ["| line | " + " | ".join(s["label"] for s in scenarios) + " |", "|---|" + "---:|" * len(scenarios)]
    for key, name in LINES:
        out.append(f"| {name} | " + " | ".join(money(million[s["label"]][part][key]) for s in scenarios) + " |")
    totals = " | ".join(f"**{money(million[s['label']][part]['total'])}**" for s in scenarios)
    out.append(f"| **total** | {totals} |")
    return out


def _fixed_usd(value: float) -> str:
    """Dollars a run: a fraction of a cent, so to the hundred-thousandth (a sign kept)."""
    return ("−" if value < 0 else "") + f"${abs(value):,.5f}"


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 0.1 else f"${value:,.2f}"


def render(report: dict[str, Any], concurrency: dict[str, int] | None = None) -> str:
    concurrency = concurrency or {}
    scenarios = report["scenarios"]
    prices = report["prices"]
    out = [
        "# What a run costs on AWS",
        "",
        f"Written by `make cost` ({report['when']}); every number below comes from its run, never by hand. It",
        "runs the demo crawl, the link-heavy docs crawl and the typed crawl (listings and the book pages they",
        "link to, `crawls/demo-types.yaml`) through the real Lambda handlers on moto",
        f"(`sluice run --emulate-aws`, {report['workers']} fetcher containers) against the demo site on 127.0.0.1",
        f"with {report['site_latency_ms']} ms of latency, and meters every AWS call: requests by operation, DynamoDB",
        "write and read units computed from item sizes by DynamoDB's rules (a failed condition costs its write",
        "units too), S3 request classes, SQS billed in 64 KB chunks, logs as the bytes the functions wrote.",
        "",
        f"Prices: {prices['region']}, on-demand list prices read {prices['read_on']}, free tiers ignored: DynamoDB",
        f"{_price(prices['dynamodb_per_million_wru'])} per million write units and"
        f" {_price(prices['dynamodb_per_million_rru'])} per million read units;",
        f"S3 {_price(prices['s3_per_thousand_put'])} per thousand PUT-class and"
        f" {_price(prices['s3_per_thousand_get'])} per thousand GET-class requests;",
        f"SQS {_price(prices['sqs_per_million'])} per million requests; Lambda arm64"
        f" {_price(prices['lambda_per_gb_s'])} per GB-s and {_price(prices['lambda_per_million_requests'])} per"
        " million requests;",
        f"CloudWatch Logs {_price(prices['logs_per_gb'])} per GB; Athena"
        f" {_price(prices.get('athena_per_tb_scanned', 5.0))} per TB scanned, each query at least 10 MB.",
        f"Memory: scheduler {report['memory_mb']['scheduler']} MB, fetcher {report['memory_mb']['fetcher']} MB,"
        f" finalizer {report['memory_mb']['finalizer']} MB.",
        "",
        "## Per million pages, and a run's fixed cost",
        "",
        "| run | pages measured | fetched | not modified | WRU / page | fixed, a run | per million pages |"
        " a 1M-page run | target (per million) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    million: dict[str, dict[str, dict[str, float]]] = {}
    for s in scenarios:
        c = concurrency.get(s["crawl"], 16)
        fitted = million[s["label"]] = per_million(report, s, c)
        slope = fitted["per_million"]["total"]
        target = TARGETS.get(s["label"])
        verdict = "" if target is None else f"≤ ${target:.2f}: " + ("**met**" if slope <= target else "MISSED")
        small = small_for(report, s["label"])
        measured = f"{s['pages']:,}" if small is None else f"{small['pages']:,} and {s['pages']:,}"
        out.append(
            f"| {s['label']} | {measured} | {s['fetched']:,} | {s['not_modified']:,} |"
            f" {s['dynamodb']['wru_per_page']:.3f} | {_fixed_usd(fitted['fixed']['total'])} | **{_usd(slope)}** |"
            f" {_usd(fitted['run']['total'])} | {verdict} |"
        )
    fixed = sorted(million[s["label"]]["fixed"]["total"] for s in scenarios)
    fraction = report.get("small_fraction")
    out += [
        "",
        *(
            [
                f"Each scenario ran twice, at the size above and at {fraction:g} of it (fetched and not modified are"
                " the larger run's),",
                "and every line is a straight line through the two runs' costs: its slope, dollars a million pages,",
                "and its intercept, what a run costs whatever its size. A run's fixed part is measured at",
                f"{_fixed_usd(fixed[0])} to {_fixed_usd(fixed[-1])} a run (the S3 writes the finalizer makes once,"
                " the scheduler's plan, the index and manifest",
                "and the Parquet copy's calls); a 1M-page run costs the two together. The target judges the slope,",
                "the per million pages column, not the scaled cost of one run (which counts the fixed part again for"
                " every run's worth of pages).",
            ]
            if fraction is not None
            else [
                "Each figure is the run's metered calls scaled to a million pages (one size measured: its fixed part"
                " is scaled with it).",
            ]
        ),
        "Lambda compute is at the stated latency, the spec's concurrency and the memory above, as the",
        "next section computes it. The Athena line is the run's Parquet copy",
        "(`sluice/pipeline/finalize/columnar.py`): one `UNLOAD` a table, started by the finalizer, which reads",
        "every byte of the run's JSON Lines. moto runs no SQL, so its scan is the size of the JSON Lines objects under",
        "each copied table's location, as the run wrote them (see [the copy's scan](#the-parquet-copys-athena-scan)).",
        "",
        "### By line, per million pages (the slope)",
        "",
        *_line_table(scenarios, million, "per_million", _usd),
        "",
        "### By line, a run's fixed cost (the intercept)",
        "",
        "The Athena scan has none: it is billed by the query, and a 1M-page run's queries are priced at their size.",
        "A line measured a little below zero is the two runs' noise around a fixed part of nothing.",
        "",
        *_line_table(scenarios, million, "fixed", _fixed_usd),
    ]
    out.append(
        "| **a 1M-page run** | "
        + " | ".join(f"**{_usd(million[s['label']]['run']['total'])}**" for s in scenarios)
        + " |"
    )
    out += ["", "## Lambda time", ""]
    first = scenarios[0]
    c0 = concurrency.get(first["crawl"], 16)
    model = lambda_model(report, first, c0) | _model_slope(report, first, c0)
    out += [
        f"From the larger runs ({first['pages']:,} pages of the demo crawl, first run). The per-million lines above"
        " put this model through both sizes.",
        "",
        f"A fetcher invocation takes {BATCH_URLS} URLs; with the spec's concurrency ({c0} for the demo crawl) and",
        f"{report['site_latency_ms']} ms a page, it waits ⌈{BATCH_URLS}/{c0}⌉ × {report['site_latency_ms']} ms on the"
        f" site, plus {SEQUENTIAL_CALLS_PER_BATCH} AWS calls made one after another",
        f"(stated at {AWS_CALL_S * 1000:.0f} ms each): {model['batch_s']:.2f} s a batch,"
        f" {model['batch_s'] / BATCH_URLS * 1000:.1f} ms a page, so {model['fetcher']:,.0f} GB-s per million pages at"
        f" {report['memory_mb']['fetcher']} MB.",
        "The scheduler sends 10,000 `SendMessageBatch` a million seeds with 8 in flight and scans the catalog",
        "run's URLs once (the tasks it makes wait in S3 for the sends); the finalizer scans the run's URLs twice"
        " and moves its parts and the reused records",
        f"through S3 (stated at {S3_BYTES_PER_S // 1024 // 1024} MB/s): together"
        f" {model['scheduler'] + model['finalizer']:,.0f} GB-s per million pages"
        " (the slope between the two sizes measured).",
        "",
        "Measured on the emulated stack, for comparison (the larger runs, every invocation timed, scaled from that"
        " run; moto is in-process and",
        "slower than DynamoDB at scans, and the machine's two cores are shared by the site and the workers):",
        "",
        "| run | fetcher invocations | fetcher s / page | scheduler s | finalizer s | Lambda at measured time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in scenarios:
        lam = s["lambda"]
        measured = s["cost"]["lambda_compute"] * MILLION / max(1, s["pages"])
        out.append(
            f"| {s['label']} | {lam['invocations'].get('fetcher', 0)} |"
            f" {lam['seconds'].get('fetcher', 0) / max(1, s['pages']) * 1000:.1f} ms |"
            f" {lam['seconds'].get('scheduler', 0):.1f} | {lam['seconds'].get('finalizer', 0):.1f} | {_usd(measured)} |"
        )
    out += [
        "",
        "## Calls per page, as metered",
        "",
        "In the larger runs, every call over the run's pages (the calls a run makes once included):",
        "",
        "| operation | " + " | ".join(s["label"] for s in scenarios) + " |",
        "|---|" + "---:|" * len(scenarios),
    ]
    operations = sorted({op for s in scenarios for op in s["calls"]})
    for op in operations:
        out.append(
            f"| `{op}` | " + " | ".join(f"{s['calls'].get(op, 0) / max(1, s['pages']):.3f}" for s in scenarios) + " |"
        )
    out += _once_calls(report, scenarios, operations)
    out += [
        "",
        "A page costs one conditional `PutItem`, its result: seeds are never claimed, and a nightly run",
        "seeds every page its catalog run knew, so only pages nobody knew cost a claim (the link-heavy first",
        "run claims each page once, plus the writes a claim loses to another container). `BatchGetItem` and",
        "`GetItem` are per batch (the batch's redelivered URLs, the run, the progress shards); `Query` is the",
        "finalizer's two scans of the run's URLs (16 partitions each) and, on a nightly run, the scheduler's scan",
        "of its catalog and the finalizer's (the records gone): one each, the scheduler's tasks kept in S3 for its"
        " sends (one `PutObject` a 10,000 pages). One `PutObject` per batch holds the batch's records; the finalizer"
        " reads them in large",
        "ranges and writes a few large files. The typed crawl's first run claims every book page (its listing",
        "found it); its nightly seeds them from the catalog, and each batch reads back the results of the",
        "listings its books name (a strongly consistent `Query` per listing, 16 at a time), so a price changed",
        "on a listing reaches the book (docs/spec.md#types): most of its `Query` calls are those.",
        "",
        "## The Parquet copy's Athena scan",
        "",
        "Measured from each run's objects: the bytes of its JSON Lines files each `UNLOAD` reads (Athena reads",
        "a JSON file whole), billed a query at a time: rounded up to the next MB, at least 10 MB,"
        f" {_price(prices.get('athena_per_tb_scanned', 5.0))} per TB",
        "(`bench/parquet_copy_cost.py`). A 1M-page run's queries are each table's bytes a page (between the two"
        " sizes measured) times a million, plus what it reads whatever the size, then billed: the per million"
        " pages line above, the 10 MB minimum long left behind.",
        *_copy_source(report),
        "",
        "| run | pages (the larger run) | UNLOADs (one a table) | JSON Lines scanned | bytes a page, at 1M pages |"
        " that run | a 1M-page run |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *_copy_rows(report, scenarios),
        "",
        "## The run's own estimate",
        "",
        "Every run's `summary.json` (and `sluice run`'s summary) carries `cost`: the finalizer's estimate from",
        "the run's own counts (result sizes, claims, batches, parts, output bytes, time pages waited on the",
        "site) at these prices; it leaves out the Parquet copy's Athena scan (the copy is started after the",
        "summary is written). Beside the metered figure for the same run (the larger runs):",
        "",
        "| run | metered | the summary's estimate |",
        "|---|---:|---:|",
    ]
    for s in scenarios:
        estimate = s.get("summary_estimate") or {}
        out.append(f"| {s['label']} | {_usd(s['cost']['total'])} | {_usd(float(estimate.get('estimated_usd', 0)))} |")
    # ProxiesEjected is published only by crawls with a proxy pool (request.proxies): one metric more for those;
    # ParquetFailed only in a month a copy failed.
    metrics, per_crawl = len(RunMetric) - 2, ALARMS_PER_CRAWL + 1
    metrics_usd, alarms_usd = metrics * 0.30, (per_crawl + PIPELINE_ALARMS) * 0.10
    fixed_usd = metrics_usd + alarms_usd + 3.00 + 1.00 + POLLING_USD
    out += finalize_gets_section()
    out += [
        "",
        "## Fixed, per month, whether runs happen or not",
        "",
        "| what | arithmetic | cost |",
        "|---|---|---:|",
        f"| run metrics | {metrics} metrics × $0.30 per crawl | ${metrics_usd:.2f} per crawl |",
        f"| alarms | {per_crawl} per scheduled crawl + {PIPELINE_ALARMS} pipeline alarms × $0.10 "
        f"| ${alarms_usd:.2f} for one crawl |",
        "| dashboard | 1 (its Logs Insights table of blocked hosts scans the fetcher's logs when viewed, "
        "$0.005 per GB) | $3.00 |",
        "| alarm topic key | 1 KMS key | $1.00 |",
        "| idle queue polling | each event source (frontier, finalize shards) long-polls (20 s): "
        "about 5 pollers × 3 a minute "
        f"| ≈ ${POLLING_USD:.2f} |",
        "| tables, queues, schedules, functions, Glue tables, Athena workgroups at rest | | $0 |",
        f"| **total for one scheduled crawl** | | **≈ ${fixed_usd:.2f}** |",
        "",
        "Storage: a run's URL entries (about 700 bytes a page) live 15 days in DynamoDB ($0.25 per GB-month):",
        "a nightly million-page crawl keeps about 15 runs, 10 GB, ≈ $2.60 a month. Parts under `work/` expire",
        "after 14 days; each run's output (records, ~6 KB a page for the demo crawl) stays in S3, moving to",
        "Infrequent Access after 30 days and Glacier Instant Retrieval after 90.",
        "",
        "Ways to spend less: a higher spec concurrency shortens the fetcher's wait per page (Lambda is the",
        "second line); a smaller fetcher memory halves Lambda if pages are small (256 MB is enough for",
        "listing pages); fewer, larger pages cost less than many small ones (a write per page).",
        "",
    ]
    out += egress_cost.render(report)
    return "\n".join(out)

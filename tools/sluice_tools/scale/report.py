"""The model's answers as JSON lines, a terminal table, and docs/scale.md (written, never edited by hand)."""

from __future__ import annotations

import math
from typing import Any

from sluice_tools.scale.inputs import Measured, Site, Stack
from sluice_tools.scale.model import Outcome
from sluice_tools.scale.quotas import Quotas
from sluice_tools.scale.scenarios import ZIPF_EXPONENT, Scenario


def record(
    scenario: Scenario, fan_out: str, finalizer: str, outcome: Outcome, batch_order: str = "interleaved"
) -> dict[str, Any]:
    """One scenario's answer: the fields `make scale ARGS=--json` prints, one object a line."""
    functions = outcome.functions
    return {
        "batch_order": batch_order,
        "urls": scenario.urls,
        "hosts": scenario.hosts,
        "distribution": scenario.distribution,
        "zipf_exponent": ZIPF_EXPONENT if scenario.distribution == "zipf" else None,
        "fan_out": fan_out,
        "finalizer": finalizer,
        "wall_s": round(outcome.wall_s, 1),
        "bound_s": round(outcome.bound_s, 1),
        "wall_over_bound": round(outcome.wall_s / outcome.bound_s, 3),
        "bound_by": outcome.bound_by,
        "pace": "sites" if outcome.bound_by.startswith("host") else "fleet",
        "critical_path": outcome.critical_path,
        "phases_s": {k: round(v, 1) for k, v in outcome.phases.items()},
        "usd": round(outcome.usd, 2),
        "usd_per_million_pages": round(outcome.usd / scenario.urls * 1e6, 3),
        "peak_concurrency": {name: use.peak_concurrency for name, use in functions.items()},
        "longest_invocation_s": {name: round(use.longest_s, 1) for name, use in functions.items()},
        "memory_mb": {name: round(use.memory_mb) for name, use in functions.items()},
        "invocations": {name: use.invocations for name, use in functions.items()},
        "busiest_dynamodb_partition": {
            "key": outcome.busiest_partition[0],
            "write_units_per_s": round(outcome.busiest_partition[1], 1),
            "read_units_per_s": round(outcome.busiest_partition[2], 1),
            "url_partition_busiest_second_wcu": round(outcome.burst_url_wcu, 1),
        },
        "busiest_s3_prefix": {
            "prefix": outcome.busiest_prefix[0],
            "put_per_s": round(outcome.busiest_prefix[1], 1),
            "get_per_s": round(outcome.busiest_prefix[2], 1),
        },
        "sqs_in_flight_peak": outcome.sqs_in_flight_peak,
        "sqs_backlog_peak": outcome.sqs_backlog_peak,
        "sqs_requests_per_s_peak": outcome.sqs_requests_peak,
        "hosts_in_first_window": outcome.hosts_in_first_window,
        "finalize_shards": outcome.shards,
        "limits_crossed": outcome.limits_crossed,
        "settings_to_raise": outcome.settings_to_raise,
        "events": outcome.events,
    }


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.0f} min"


def table(rows: list[dict[str, Any]]) -> str:
    """The scenarios as a markdown table."""
    head = (
        "| URLs | hosts | hosts by | fan-out / finalizer | night | lower bound | night ÷ bound | pace set by | $ a run "
        "| fetchers at once | longest fetcher / finalizer | finalizer memory "
        "| busiest DynamoDB partition (WCU/s, RCU/s) "
        "| busiest S3 prefix (PUT/s, GET/s) | SQS in flight | limits crossed |\n"
        "|---:|---:|---|---|---:|---:|---:|---|---:|---:|---|---:|---|---|---:|---|\n"
    )
    lines = []
    for r in rows:
        part, prefix = r["busiest_dynamodb_partition"], r["busiest_s3_prefix"]
        limits = "; ".join(r["limits_crossed"]) or "none"
        if r["settings_to_raise"]:
            limits += " (stack: " + "; ".join(r["settings_to_raise"]) + ")"
        lines.append(
            f"| {r['urls']:,} | {r['hosts']:,} | {r['distribution']} | {r['fan_out']} / {r['finalizer']} "
            f"| {hours(r['wall_s'])} | {hours(r['bound_s'])} | {r['wall_over_bound']:.2f} | {r['pace']} "
            f"| ${r['usd']:,.2f} | {r['peak_concurrency']['fetcher']} "
            f"| {r['longest_invocation_s']['fetcher']:,.0f} s / {r['longest_invocation_s']['finalizer']:,.0f} s "
            f"| {r['memory_mb']['finalizer']:,} MB | {part['key']} ({part['write_units_per_s']:,.0f}, "
            f"{part['read_units_per_s']:,.0f}) | {prefix['prefix'].split(' ')[0]} ({prefix['put_per_s']:,.0f}, "
            f"{prefix['get_per_s']:,.0f}) | {r['sqs_in_flight_peak']:,} | {limits} |"
        )
    return head + "\n".join(lines) + "\n"


def terminal(rows: list[dict[str, Any]]) -> str:
    """A short line a scenario, for the terminal."""
    out = []
    for r in rows:
        limits = "; ".join(r["limits_crossed"]) or "no limit crossed"
        out.append(
            f"{r['urls']:>11,} URLs {r['hosts']:>6,} hosts {r['distribution']:<4} "
            f"{r['fan_out']:>11}/{r['finalizer']:<7} "
            f"night {hours(r['wall_s']):>9}  bound {hours(r['bound_s']):>9} ({r['pace']})  x{r['wall_over_bound']:.2f}"
            f"  ${r['usd']:,.2f}  fetchers {r['peak_concurrency']['fetcher']}  | {limits}"
            + ("  | stack: " + "; ".join(r["settings_to_raise"]) if r["settings_to_raise"] else "")
        )
    return "\n".join(out)


def quota_table(quotas: Quotas) -> str:
    rows = "".join(
        f"| `{q.name}` | {q.value:,.0f} {q.unit} | {q.what} | [{q.source}]({q.url}) |\n"
        for q in quotas.entries.values()
    )
    return "| quota | value | what | source |\n|---|---:|---|---|\n" + rows


def settings_table(stack: Stack, site: Site, measured: Measured, quotas: Quotas) -> str:
    """What the model read, and from where."""
    share = min(1.0, stack.fetcher_memory_mb / quotas["lambda_mb_per_vcpu"])
    rows = [
        ("fetcher_max_concurrency", stack.fetcher_max_concurrency, "infra/config.py StackConfig"),
        (
            "batch_size, urls_per_message",
            f"{stack.batch_size}, {stack.urls_per_message}",
            "infra/config.py StackConfig",
        ),
        ("pack_receives", stack.pack_receives, "infra/config.py StackConfig"),
        (
            "fetcher / scheduler / finalizer memory, timeout",
            f"{stack.fetcher_memory_mb} MB {stack.fetcher_timeout_s:g} s / {stack.scheduler_memory_mb} MB "
            f"{stack.scheduler_timeout_s:g} s / {stack.finalizer_memory_mb} MB {stack.finalizer_timeout_s:g} s",
            "infra/config.py StackConfig",
        ),
        ("run_deadline_hours", f"{stack.run_deadline_s / 3600:g}", "infra/config.py StackConfig"),
        (
            "finalize_shard_pages, finalizer_shard_max_concurrency, host_backlog_messages",
            f"{stack.finalize_shard_pages:,}, {stack.finalizer_shard_max_concurrency}, {stack.host_backlog_messages}",
            "StackConfig when it has them, else the defaults in tools/sluice_tools/scale/inputs.py "
            "(issue 17, items 1 and 2)",
        ),
        (
            "fan-out send step, requests in flight",
            f"{stack.send_chunk_tasks:,} tasks, {stack.send_requests_in_flight}",
            "sluice.pipeline.start.fanout.CHUNK, SqsQueue(senders=)",
        ),
        (
            "spec concurrency, concurrency_per_domain, min delay",
            f"{site.concurrency}, {site.concurrency_per_domain}, {site.min_delay_s:g} s",
            "the spec's defaults (sluice.spec.models.Politeness)",
        ),
        (
            "site latency",
            f"{site.latency_s * 1000:g} ms",
            "`make cost`'s site latency (bench/results/cost-latest.json)",
        ),
        (
            "AWS call, sequential calls a batch",
            f"{stack.aws_call_s * 1000:g} ms, {stack.sequential_calls_per_batch}",
            "stated, as bench/cost_report.py states them",
        ),
        (
            "write / read units a page",
            f"{measured.write_units:.3f} / {measured.read_units:.3f}",
            measured.sources["calls, units and bytes a page"],
        ),
        (
            "S3 PUT / GET a page, SQS requests a page",
            f"{measured.s3_puts:.4f} / {measured.s3_gets:.4f}, {measured.sqs_requests:.3f}",
            measured.sources["calls, units and bytes a page"],
        ),
        (
            "fetcher CPU a page",
            f"{measured.cpu_s * 1000:.2f} ms on this machine, ÷ {share:.2f} vCPU at {stack.fetcher_memory_mb} MB",
            measured.sources["CPU and memory a page"],
        ),
        (
            "finalizer: time, bytes moved, memory a page",
            f"{measured.finalize_s * 1000:.3f} ms, {measured.finalize_bytes / 1000:.1f} KB "
            f"(at 100 MB/s), {measured.finalize_mb * 1024:.1f} KB of its shard",
            f"{measured.sources['CPU and memory a page']}; memory: {measured.sources['finalizer memory a page']}",
        ),
        (
            "each function's base memory",
            ", ".join(f"{name} {mb:.0f} MB" for name, mb in measured.base_rss_mb.items()),
            measured.sources["process memory"],
        ),
    ]
    body = "".join(f"| {name} | {value} | {source} |\n" for name, value, source in rows)
    return "| input | value | from |\n|---|---|---|\n" + body


def advice_table(advice: list[dict[str, Any]]) -> str:
    head = (
        "| URLs a night | fetcher_max_concurrency | scheduler memory_mb | run_deadline_hours | finalize shards "
        "| night at these settings (1,000 hosts, even) | limits crossed |\n|---:|---:|---:|---:|---:|---:|---|\n"
    )
    rows = "".join(
        f"| {a['urls']:,} | {a['fetcher_max_concurrency']} | {a['scheduler_memory_mb']:,} | {a['run_deadline_hours']} "
        f"| {a['shards']} | {hours(a['wall_s'])} | {'; '.join(a['limits_crossed']) or 'none'} |\n"
        for a in advice
    )
    return head + rows


def memory_size(mb: float) -> int:
    """The Lambda memory setting to ask for: the next power of two from 1,024 MB that holds ``mb``."""
    size = 1024
    while size < mb:
        size *= 2
    return min(size, 10240) if mb <= 10240 else math.ceil(mb)

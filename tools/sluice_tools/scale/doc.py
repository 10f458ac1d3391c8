"""docs/scale.md, written by `make scale` from the nights it played (edit this file and rerun, never the doc)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sluice_tools.scale.inputs import ROOT, S3_BYTES_PER_S, Measured, Site, Stack
from sluice_tools.scale.model import BatchOrder, batch_rounds
from sluice_tools.scale.quotas import Quotas
from sluice_tools.scale.report import advice_table, hours, quota_table, settings_table, table
from sluice_tools.scale.scenarios import ZIPF_EXPONENT

CHECK_FILE = ROOT / "bench" / "results" / "scale-check.json"


def _rounds(site: Site, order: BatchOrder) -> int:
    wanted = -(-site.concurrency // site.concurrency_per_domain)
    return batch_rounds((100,) * wanted, site.concurrency, site.concurrency_per_domain, order)


def _pick(rows: list[dict[str, Any]], urls: int, hosts: int, distribution: str, fan_out: str) -> dict[str, Any] | None:
    for r in rows:
        if (r["urls"], r["hosts"], r["distribution"], r["fan_out"]) == (urls, hosts, distribution, fan_out):
            return r
    return None


def _target_lines(rows: list[dict[str, Any]], label: str) -> list[str]:
    lines = []
    for distribution in ("even", "zipf"):
        r = _pick(rows, 10_000_000, 1000, distribution, "round-robin")
        if r is None:
            continue
        ok = not r["limits_crossed"] and r["wall_over_bound"] <= 1.15
        lines.append(
            f"- {label}, 10M URLs over 1,000 hosts, {distribution}: night {hours(r['wall_s'])}, lower bound "
            f"{hours(r['bound_s'])} (set by {r['bound_by']}), {r['wall_over_bound']:.2f} x the bound, "
            f"limits crossed: {'; '.join(r['limits_crossed']) or 'none'}. "
            f"Target (no limit, at most 1.15 x): **{'met' if ok else 'missed'}**."
            + (f" Stack setting to raise: {'; '.join(r['settings_to_raise'])}." if r["settings_to_raise"] else "")
        )
    r = _pick(rows, 10_000_000, 1000, "even", "round-robin")
    if r is not None:
        fits = r["wall_s"] <= 8 * 3600
        lines.append(
            f"- {label}, the even night at the stack's defaults ({r['peak_concurrency']['fetcher']} fetchers): "
            f"{hours(r['wall_s'])}; fits in 8 hours: **{'yes' if fits else 'no'}**."
        )
    return lines


def _verdicts(rows: list[dict[str, Any]], fixed: list[dict[str, Any]]) -> str:
    """The issue's targets, each with the row that meets or misses it."""
    lines = _target_lines(rows, "Hosts in turn (what visit.py does)") + _target_lines(fixed, "Message order (before)")
    big = [r for r in rows if r["urls"] == 100_000_000 and r["fan_out"] == "round-robin"]
    if big:
        named = sorted({limit.split(":")[0] for r in big for limit in r["limits_crossed"]})
        even = _pick(rows, 100_000_000, 1000, "even", "round-robin")
        outgrown = "; ".join(even["settings_to_raise"]) if even else ""
        lines.append(
            f"- 100M URLs at the defaults: limits crossed: {', '.join(named) or 'none'}. Over 1,000 hosts, even: "
            f"{outgrown or 'it fits the deadline'}. The advice below says what to set."
        )
    return "\n".join(lines)


def _pushed(push: list[dict[str, Any]]) -> str:
    if not push:
        return "Not played in this run (it plays with the 100M size).\n"
    head = "| fetcher_max_concurrency | night | busiest DynamoDB partition (WCU/s, RCU/s) | limits crossed |\n"
    head += "|---:|---:|---|---|\n"
    rows = "".join(
        f"| {r['fetcher_max_concurrency']:,} | {hours(r['wall_s'])} | {r['busiest_dynamodb_partition']['key']} "
        f"({r['busiest_dynamodb_partition']['write_units_per_s']:,.0f}, "
        f"{r['busiest_dynamodb_partition']['read_units_per_s']:,.0f}) | {'; '.join(r['limits_crossed']) or 'none'} |\n"
        for r in push
    )
    return head + rows


def _check(check: dict[str, Any] | None) -> str:
    if check is None:
        return "Not run yet: `make scale ARGS=--check` runs it and writes `bench/results/scale-check.json`.\n"
    s, p, m = check["setup"], check["predicted"], check["measured"]
    return (
        f"`{check['command']}` ({check['when']}): a real `sluice run` (the local runner) of {s['pages']:,} pages over "
        f"{s['hosts']} demo sites on loopback (each its own address and queue group), cap {s['cap']} a host, "
        f"{s['latency_ms']:g} ms a page, {s['workers']} workers, spec concurrency {s['spec_concurrency']}.\n\n"
        "| | wall | detail |\n|---|---:|---|\n"
        f"| predicted by the model | {p['wall_s']:.1f} s | fetch {p['fetch_s']:.1f} s + "
        f"finalize {p['finalize_s']:.1f} s; "
        f"lower bound {p['bound_s']:.1f} s; {p['invocations']} batches; CPU {p['cpu_ms_per_page']} ms a page "
        "(`make bench`) |\n"
        f"| measured | {m['wall_s']:.1f} s | {m['fetched']:,} pages fetched, {m['hosts_a_batch']} hosts a batch, "
        f"at most {m['worst_host_concurrency']} requests on one host; "
        f"the runner's CPU {m['runner_cpu_ms_per_page']} ms a "
        f"page; load average {m['load_average_before']} before the run |\n\n"
        f"**Error: {check['error']:+.1%}** ((predicted - measured) / measured), predicted before the run with the "
        f"{p['cpu_share']:.0%} of a core a busy loop got then ({p['quiet_machine_wall_s']:.1f} s on a quiet machine).\n"
        + _after(check, m)
    )


def _after(check: dict[str, Any], m: dict[str, Any]) -> str:
    after = check.get("at_the_share_the_runner_got")
    if after is None:
        return ""
    quiet, bound = check["predicted"]["quiet_machine_wall_s"], check["predicted"]["bound_s"]
    cpu_bound = float(m["runner_cpu_ms_per_page"]) * int(m["fetched"]) / 1000 / max(0.01, float(after["cpu_share"]))
    return (
        f"\nOn a quiet machine the model puts this night at {quiet:.1f} s, its {bound:.0f} s bound (the sites' "
        f"politeness) and {quiet - bound:.1f} s of batches' CPU and finalizing. The machine was not quiet: other "
        f"work shared its 2 cores (load average {m['load_average_before']} before the run), and the measured time "
        f"is this loaded machine's. The runner used {after['cpu_share']:.0%} of a core over the run "
        f"({m['runner_cpu_ms_per_page']} ms a page); played again at that share, the model says "
        f"{after['wall_s']:.1f} s ({after['error']:+.1%}): on a machine this loaded, the one event loop every local "
        f"worker shares also slows it. Its CPU alone, {m['runner_cpu_ms_per_page']} ms a page for "
        f"{m['fetched']:,} pages at {after['cpu_share']:.0%} of a core, takes {cpu_bound:.0f} s: the measured run was "
        "bound by the CPU the machine gave it, not by the sites or the model's fleet. On AWS each fetcher has its "
        "own CPU, which the grid above plays.\n"
    )


def render(
    rows: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    tips: list[dict[str, Any]],
    push: list[dict[str, Any]],
    stack: Stack,
    site: Site,
    figures: Measured,
    quotas: Quotas,
    check: dict[str, Any] | None,
    argv: str,
) -> str:
    if check is None and CHECK_FILE.exists():
        check = json.loads(Path(CHECK_FILE).read_text(encoding="utf-8"))
    new = [r for r in rows if r["fan_out"] == "round-robin"]
    pairs = [r for r in rows if r["urls"] == 10_000_000 and r["hosts"] > 1]
    per_page = figures.finalize_s + figures.finalize_bytes / S3_BYTES_PER_S
    command = "make scale" + (f" ARGS='{argv}'" if argv else "")
    return f"""# How far a night scales

Written by `{command}` ({datetime.now(UTC):%Y-%m-%d}) from the nights it played; every number below comes
from its run (`tools/sluice_tools/scale/`), never by hand. `make scale ARGS=--json` prints one JSON object
a scenario instead; `make scale ARGS=--check` adds a real local run against its prediction.

The model is a discrete-event simulation of the deployed stack (a heap of timed events, one a fetcher
batch; each night plays in seconds): the scheduler's fan-out (its SendMessageBatch requests, 8 in
flight, and its continuation in a fresh invocation near its 15 minutes), the SQS FIFO frontier (a
message group per host, one batch in flight a group, groups found only among the first 120,000
messages, at most 120,000 in flight), the fetchers (at most `fetcher_max_concurrency`, batches of up to
10 messages, packing up to `pack_receives` more receives while the batch's hosts x their cap fall short
of the spec's concurrency), each host at its cap and latency (or its min delay), each invocation's CPU
at its memory's share of a vCPU and its timeout, the finalizer (one invocation, or shards of at most
`finalize_shard_pages` pages, `finalizer_shard_max_concurrency` at a time, then the combine step), and
the DynamoDB partitions, S3 prefixes and SQS rates all of that loads. It names every AWS limit a night
crosses, and the stack settings it outgrows.

## The targets

{_verdicts(rows, fixed)}

## Every night, at the stack's settings

Sites answer in {site.latency_s * 1000:g} ms, at the spec's defaults (concurrency {site.concurrency},
{site.concurrency_per_domain} a host, no min delay); a nightly run, every URL a seed from the catalog.
*Zipf*: host sizes fall off as 1 / rank^{ZIPF_EXPONENT:g}, the biggest host first in the seed file
(seed files are grouped by host, and the biggest first is the old fan-out's worst case). The
**lower bound** is the larger of the biggest host's URLs ÷ its polite rate (cap ÷ latency) and all
URLs ÷ the fleet's rate at the stack's maximum (`fetcher_max_concurrency` x the spec's concurrency
÷ latency); *pace set by* says which. Fan-out *round-robin* and finalizer *sharded* are issue 17's
(items 1 and 2); the night's dollars are the
project's price table (`sluice.domain.cost`) over what the night used.

{table(new)}
## The batch's order: what the targets need

A fetcher's batch takes the spec's `concurrency` slots one host at a time in turn
(`pipeline/visit/batch.py`, `by_host_in_turn`). It took them in message order until this model showed
what that cost: a packed batch holds several hosts, each message 10 URLs of one host, so the first
host's URLs filled every slot while only its cap of them ran (a URL holds its slot while it waits on
its host's cap), and the hosts packed behind it waited: at the defaults (32 slots, 8 a host) a batch
of 4 hosts' 100 URLs takes {_rounds(site, "by-message")} round trips in message order instead of
{_rounds(site, "interleaved")}. The 10M nights in message order, as they ran before:

{table(fixed)}
## Before and after: the old fan-out and finalizer

The same 10M-URL nights with the seed-order fan-out (every host's messages as the seed file lists
them) and the one finalizer invocation, beside the round-robin fan-out (one message a host a round,
at most `host_backlog_messages` = {stack.host_backlog_messages} a host in the queue, the next wave sent by
the fetcher that ends the last) and the sharded finalizer.

{table(pairs)}
With the old fan-out, a host whose backlog passes the first 120,000 messages hides every host behind
it: the fetchers crawl the few hosts they can see, each invocation short of the hosts its concurrency
wants. The one finalizer needs about {per_page * 1000:.2f} ms and {figures.finalize_mb * 1024:.1f} KB a
page over its {figures.base_rss_mb["finalizer"]:.0f} MB base (a sharded finalize task's measured memory a
page of its shard, which one invocation holding every page would hold for all of them): past Lambda's
15 minutes at about {900 / per_page / 1e6:.1f}M pages, and past its 10,240 MB at about
{(10240 - figures.base_rss_mb["finalizer"]) / figures.finalize_mb / 1e6:.1f}M.

## What to set, for each size

The settings that fit an even night over 1,000 hosts in 8 hours, and that night played with them. A
Zipf night is set by its biggest host, not the fleet: more fetchers do not shorten it, a higher
`concurrency_per_domain` (if the site allows) or a longer `run_deadline_hours` does.

{advice_table(tips)}
`fetcher_max_concurrency` buys pages a second linearly until the stack's own partitions give out:
each page is one conditional write on one of 16 URL partitions (DynamoDB takes 1,000 write units a
second a partition), and each batch reads the 16 progress items of one partition key (3,000 read
units a second). The 100M-URL night over 10,000 hosts, even, with more fetchers
(`make scale ARGS='--fetchers N --no-docs'` plays any):

{_pushed(push)}
## Where each number comes from

{settings_table(stack, site, figures, quotas)}
A page's calls, units and log bytes are the slope between `make cost`'s two runs of its scenario (what a
page adds), never one run divided by its pages: a run makes about {figures.run_s3_puts:.0f} S3 PUTs and
{figures.run_s3_gets:.0f} GETs whatever its size (the finalize shard's plan, scan, keys and write objects
and their indexes, the manifest, summary and page index, robots.txt, the Parquet copy's state), which the
sharded finalizer, the fan-out's backlog and the Parquet copy added and which, spread over a 2,000-page
run, read as a page's. A page's own are a PUT of its batch's part and a ranged GET of it by the
finalizer, and its share of the fan-out's backlog GET a wave (a host's 200 URLs at the default cap),
which the model takes from the slope alone (the waves it plays add time, not GETs again). S3 requests
count by price class, as `make cost` prices them (`sluice_tools.meter.prices`: PUT, COPY, POST, LIST and
multipart uploads; GET and HEAD): the metered runs make only PutObject and GetObject, so the 3,500 PUTs
and 5,500 GETs a second a prefix takes count the same requests. Each function's base memory is the higher
of the engine's peak RSS (fetch and extract at the spec's concurrency: flat from 1,000 to 10,000 pages,
as a fetcher's batch is whatever the night's size) and its handler's RSS once imported with its AWS
clients built (`python -m sluice_tools.scale.handler_memory`), not `sluice run`'s, whose process also
holds the local store and finalizes, and whose nightly variant runs the first run before it. The
scheduler adds its seeds, a finalize task the measured memory a page of its shard (`python -m
bench.finalize_scale --synthetic N`'s worst task, less the interpreter's), never the local bench's
finalize RSS rise, which stays flat whatever the run's size.

AWS's limits, from `tools/sluice_tools/scale/quotas.yaml` (one entry a limit, with its source):

{quota_table(quotas)}
## Check: predicted against measured

{_check(check)}
## What the model leaves out

- Links found on a first run: it plays a nightly (every URL a seed); a first run claims its links (a
  second write a page, `make cost`'s link-heavy rows) and grows its queue as it goes.
- Failures, retries, 429s and the adaptive throttle, Retry-After pauses, robots.txt: a night without them.
- The scheduler's catalog scan before its first send, and cold starts other than those stated.
- Bursts: DynamoDB, S3 and SQS figures are the busiest minute's mean a second, writes counted when a
  batch writes them (at its end). Equal batches end in the same second in the model (real fetchers
  drift apart), so the busiest single second (`url_partition_busiest_second_wcu` in `--json`) is a
  lockstep burst that DynamoDB throttles and botocore retries; adaptive capacity and S3's
  repartitioning are not played.
- A Lambda fetcher's CPU is `make bench`'s CPU a page on this machine, divided by the function's share
  of a vCPU (1,769 MB is one): not measured on Lambda.
"""

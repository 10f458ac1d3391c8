"""The finalizer's last step: every shard written, combine their results into the run's output and summary.

The page index and manifest, the run's tally and verdict, its summary (``summary.json``) and
metrics, and its lock released; or, when finalizing cannot complete, the run ended failed with
the reason in its summary. ``sluice.pipeline.finalize.driver`` drives the phases that lead here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from sluice.domain.layout import summary_key
from sluice.domain.runs import RunState
from sluice.domain.summary import RunSummary
from sluice.domain.tally import RunTally, merge, run_tally_from_plain
from sluice.domain.verdict import Verdict, judge
from sluice.observability import logger
from sluice.pipeline.finalize.output import OutputPlan, OutputSummary, write_index_and_manifest
from sluice.pipeline.finalize.run_metrics import emit_failed, emit_metrics
from sluice.pipeline.finalize.shards import KEYS, SCAN, WRITE, Attempt, index_rows, results
from sluice.pipeline.finalize.summary import cost_section, failed_summary, previous_types, run_summary
from sluice.pipeline.finalize.usage import UsageCounter
from sluice.pipeline.services import Services
from sluice.pipeline.start.sitemapseeds import load_report
from sluice.spec import CrawlSpec

SUMMARY_TYPE = "application/json"


@dataclass(frozen=True, slots=True)
class Finalized:
    """A run finalized (finished, unfinished or failed): its summary, and where it is stored."""

    crawl: str
    run_id: str
    summary: RunSummary
    summary_key: str


@dataclass(frozen=True, slots=True)
class Judged:
    """A run's output written and judged: its summary (not yet stored), verdict and output."""

    summary: RunSummary
    verdict: Verdict
    output: OutputSummary
    finished: bool
    tally: RunTally


@dataclass(slots=True)
class _ShardResults:
    """The shards' results added up: the run's tally and usage, the catalog comparison, the shards' own time."""

    tally: RunTally
    usage: UsageCounter
    previous_records: int = 0
    gone_records: int = 0
    shard_s: float = 0.0
    written: list[dict[str, Any]] | None = None


def _shard_results(services: Services, run: RunState, attempt: Attempt) -> _ShardResults:
    objects = services.objects
    added = _ShardResults(RunTally(seeds=run.seeds), UsageCounter(run_id=run.run_id))
    for result in results(objects, attempt, SCAN):
        merge(added.tally, run_tally_from_plain(result["tally"]))
        added.usage.merge(result["usage"])
        added.shard_s += float(result["seconds"])
    for result in results(objects, attempt, KEYS):
        added.previous_records += int(result["previous"])
        added.gone_records += int(result["gone"])
        added.shard_s += float(result["seconds"])
    added.written = list(results(objects, attempt, WRITE))
    added.shard_s += sum(float(r["seconds"]) for r in added.written)
    return added


def judge_attempt(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt) -> Judged:
    """The shards' results combined: the run's tally, its output (index and manifest written), its verdict."""
    crawl, run_id, objects = run.crawl, run.run_id, services.objects
    started = time.monotonic()
    added = _shard_results(services, run, attempt)
    tally, written = added.tally, added.written or []
    plan = OutputPlan(crawl, run_id, run.catalog_run, typed=spec.types is not None)
    output = write_index_and_manifest(objects, plan, written, index_rows(objects, attempt, written))
    finished = tally.drained and attempt.stopped is None  # a run stopped early is unfinished, however little it had
    previous = services.ledger.latest_finished(crawl, run_id)
    gone = (added.previous_records, added.gone_records) if run.catalog_run is not None else None
    by_type = {kind: output.types.get(kind, 0) for kind in spec.types} if spec.types is not None else None
    previous_by_type = previous_types(objects, previous) if spec.types is not None else {}
    counts = tally.counts(output.records, gone, by_type)
    sitemaps = load_report(objects, crawl, run_id) if spec.seeds.sitemaps is not None else None
    if sitemaps is not None:  # page URLs the sitemaps listed past max_urls or max_pages: the crawl was cut short
        counts = replace(counts, sitemap_left_out=int(sitemaps.get("left_out", 0)))
    verdict = judge(
        counts,
        previous.records if previous is not None else None,
        spec.alerts,
        finished=finished,
        follow=spec.follow,
        previous_by_type=previous_by_type if spec.types is not None else None,
    )
    summary = run_summary(
        run,
        spec,
        counts,
        tally,
        output,
        verdict,
        previous=previous,
        gone=gone,
        previous_by_type=previous_by_type,
        sitemaps=sitemaps,
        egress_ips=services.tuning.egress_ips,
        finished=finished,
        stopped=attempt.stopped,
        now=services.clock(),
    )
    finalize_s = added.shard_s + time.monotonic() - started
    variable, fixed = added.usage.usage(
        services.tuning,
        output,
        seeds=run.seeds,
        concurrency=spec.politeness.concurrency,
        catalog=run.catalog_run is not None,
        finalize_s=finalize_s,
        shards=attempt.count,
    )
    summary = replace(
        summary,
        finalize_s=round(finalize_s, 3),
        finalize_shards=attempt.count,
        cost=cost_section(variable, fixed, tally.enqueued),
    )
    return Judged(summary, verdict, output, finished, tally)


def combine(services: Services, attempt: Attempt) -> Finalized | None:
    """Every shard written: the run's page index, manifest, summary and metrics; then its lock is released."""
    run = services.ledger.get_run(attempt.crawl, attempt.run_id)
    if run is None or run.status == "finished":
        return None
    crawl, run_id = run.crawl, run.run_id
    judged = judge_attempt(services, run, services.spec(crawl), attempt)
    summary = judged.summary
    key = summary_key(crawl, run_id)
    services.objects.put(key, summary.to_bytes(), SUMMARY_TYPE)
    emit_metrics(summary, now=services.clock())
    services.ledger.finish(
        crawl, run_id, healthy=summary.healthy, complete=judged.finished, records=summary.records_total, summary_key=key
    )
    logger.info(
        "run finalized",
        extra={"crawl": crawl, "run_id": run_id, "healthy": summary.healthy, "shards": attempt.count},
    )
    return Finalized(crawl, run_id, summary, key)


def fail_run(services: Services, run: RunState, reason: str) -> Finalized:
    """End a run failed: a summary that says why, the run-failed metric (its alarm pages), the lock released.

    What the run collected stays where it is (its URLs' results, its parts): once the cause is fixed,
    ``sluice reextract`` or a new run can build on them (docs/operations.md)."""
    crawl, run_id = run.crawl, run.run_id
    key = summary_key(crawl, run_id)
    summary = failed_summary(run, reason, now=services.clock())
    services.objects.put(key, summary.to_bytes(), SUMMARY_TYPE)
    emit_failed(summary)
    services.ledger.finish(crawl, run_id, healthy=False, complete=False, records=0, summary_key=key)
    return Finalized(crawl, run_id, summary, key)

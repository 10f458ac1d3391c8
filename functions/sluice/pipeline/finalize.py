"""Finalize a run: count it, write its output, judge it, emit its metrics, release its lock.

Counting is exact and happens here, once: every URL's result is read back from the frontier.
A run is drained when every seed and every claimed link has its result. A drained run has no
URL in flight, so nothing can add to it; but a scan is not a snapshot, and a page counted
mid-scan could have claimed a link in a partition the scan had passed. So the scan is repeated:
when a second scan finds exactly as many URLs as a first that found every one done, nothing
happened in between, and the first scan's counts are the run's. Finalizing happens once per run
(a conditional status change guards it). A run past its deadline is finalized as it stands, as
unfinished, by the sweep.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sluice.domain.churn import RecordChurn
from sluice.domain.cost import US_EAST_1, RunUsage
from sluice.domain.egress import ProxyTally, egress_of
from sluice.domain.layout import summary_key
from sluice.domain.runs import RunState
from sluice.domain.tally import RunTally, TypeTally
from sluice.domain.verdict import RunCounts, Verdict, judge
from sluice.messages import UrlTask
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics
from sluice.pipeline.output import OutputPlan, OutputSummary, Reading, write_output
from sluice.pipeline.services import Services
from sluice.pipeline.sitemapseeds import load_report
from sluice.pipeline.usage import UsageCounter
from sluice.spec import CrawlSpec, Follow

FINALIZING_STALE_S = 20 * 60
"""A run still finalizing after this long lost its finalizer (15-minute timeout): it is finalized again."""


@dataclass(frozen=True, slots=True)
class Finalized:
    crawl: str
    run_id: str
    summary: dict[str, Any]
    summary_key: str


def finalize_run(
    crawl: str, run_id: str, services: Services, *, force: bool = False, stopped: str | None = None
) -> Finalized | None:
    """Finalize a run if it is drained (or overdue, or ``force``); None if it is not time yet or already done.

    ``stopped`` says why a forced run ended early; the summary carries it.
    """
    run = services.ledger.get_run(crawl, run_id)
    if run is None or run.status == "finished":
        return None
    if run.status == "finalizing":
        if not (force or run.finalizing_for() > FINALIZING_STALE_S):
            return None
        # The finalizer died mid-way: every output key is rewritten whole, so doing it again is safe.
        logger.warning("finalizing again after an interrupted finalizer", extra={"crawl": crawl, "run_id": run_id})
        return _finish(services, run, _count(services, run), stopped)
    as_it_stands = force or run.overdue
    if as_it_stands:
        if not services.ledger.begin_finalizing(crawl, run_id):
            return None
        count = _count(services, run)
    else:
        if run.seeding:
            return None
        count = _count(services, run)
        if not count.tally.drained:
            services.ledger.checked(crawl, run_id, count.tally.done)
            pending = count.tally.pending
            logger.info("run not drained yet", extra={"crawl": crawl, "run_id": run_id, "pending": pending})
            return None
        if sum(1 for _ in services.frontier.scan(run_id)) != count.tally.entries:
            logger.info("run still moving: finalizing later", extra={"crawl": crawl, "run_id": run_id})
            return None
        if not services.ledger.begin_finalizing(crawl, run_id):
            return None
    return _finish(services, run, count, stopped)


@dataclass
class _Count:
    tally: RunTally
    plan: OutputPlan
    usage: UsageCounter
    churn: RecordChurn


def _count(services: Services, run: RunState, spec: CrawlSpec | None = None) -> _Count:
    typed = (spec or services.spec(run.crawl)).types is not None
    count = _Count(
        RunTally(seeds=run.seeds),
        OutputPlan(run.crawl, run.run_id, run.catalog_run, typed=typed),
        UsageCounter(run_id=run.run_id),
        RecordChurn(),
    )
    for entry in services.frontier.scan(run.run_id):
        count.tally.add(entry)
        count.plan.add(entry)
        count.usage.add(entry)
        count.churn.add_after(entry.result)
    return count


def _gone(services: Services, run: RunState, churn: RecordChurn) -> tuple[int, int] | None:
    """``(previous, gone)`` against the catalog run (the run this one was seeded from), if it has one."""
    if run.catalog_run is None:
        return None
    for entry in services.frontier.scan(run.catalog_run, consistent=False):  # a finished run: nothing moves
        churn.add_before(entry.result)
    return churn.counts()


@dataclass(frozen=True, slots=True)
class Judged:
    """A run's output written and judged: its summary (not yet stored), verdict and output."""

    summary: dict[str, Any]
    verdict: Verdict
    output: OutputSummary
    finished: bool


def rebuild_output(services: Services, run: RunState, spec: CrawlSpec, *, stopped: str | None = None) -> Judged:
    """Count a run from its URLs' results and write its output and verdict again, as finalizing does.

    ``sluice reextract`` calls it once the run's results hold the re-extracted records: every output key is
    rewritten whole, from the results, exactly as the finalizer writes it."""
    return _judge(services, run, _count(services, run, spec), spec, stopped)


def _finish(services: Services, run: RunState, count: _Count, stopped: str | None = None) -> Finalized:
    crawl, run_id = run.crawl, run.run_id
    judged = _judge(services, run, count, services.spec(crawl), stopped)
    summary, verdict, output, tally = judged.summary, judged.verdict, judged.output, count.tally
    key = summary_key(crawl, run_id)
    services.objects.put(key, summary_json(summary), "application/json")
    emit_metrics(run, tally, output, verdict, estimated_usd=summary["cost"]["estimated_usd"])
    services.ledger.finish(
        crawl, run_id, healthy=verdict.healthy, complete=judged.finished, records=output.records, summary_key=key
    )
    logger.info("run finalized", extra={"crawl": crawl, "run_id": run_id, "healthy": verdict.healthy})
    return Finalized(crawl, run_id, summary, key)


def _judge(services: Services, run: RunState, count: _Count, spec: CrawlSpec, stopped: str | None) -> Judged:
    crawl, run_id, tally = run.crawl, run.run_id, count.tally
    started = time.monotonic()
    tuning = services.tuning
    finished = tally.drained and stopped is None  # a run stopped early is unfinished, however little it had
    output = write_output(services.objects, count.plan, Reading(tuning.output_span_bytes, tuning.output_readers))
    previous = services.ledger.latest_finished(crawl, run_id)
    gone = _gone(services, run, count.churn)
    by_type = {kind: output.types.get(kind, 0) for kind in spec.types} if spec.types is not None else None
    previous_by_type = previous_types(services, previous) if spec.types is not None else None
    counts = tally.counts(output.records, gone, by_type)
    verdict = judge(
        counts,
        previous.records if previous is not None else None,
        spec.alerts,
        finished=finished,
        follow=spec.follow,
        previous_by_type=previous_by_type,
    )
    summary = run_summary(run, tally, output, verdict, previous, finished=finished, spec_follow=spec.follow)
    if spec.types is not None:
        summary["types"] = types_section(counts, tally, previous_by_type or {})
        summary["pages"]["carry_stale"] = tally.carry_stale
        summary["records"]["carry_dropped"] = dict(tally.carry_dropped)
    summary["records"]["gone"] = gone[1] if gone is not None else None
    summary["records"]["in_catalog_run"] = gone[0] if gone is not None else None
    if stopped is not None:
        summary["stopped"] = stopped
    summary |= egress_section(spec, tally, tuning.egress_ips)
    if spec.seeds.sitemaps is not None:
        summary["sitemaps"] = load_report(services.objects, crawl, run_id)  # None: the start never read them
    if spec.recrawl is not None:
        # Pages not due, counted apart by what said so: a sitemap's lastmod, or the recrawl schedule.
        by_schedule = tally.not_due_scheduled
        summary["pages"]["not_due_by"] = {"sitemap": tally.not_due - by_schedule, "schedule": by_schedule}
    finalize_s = time.monotonic() - started
    variable, fixed = count.usage.usage(
        tuning,
        output,
        seeds=run.seeds,
        concurrency=spec.politeness.concurrency,
        catalog=run.catalog_run is not None,
        finalize_s=finalize_s,
    )
    summary["finalize_s"] = round(finalize_s, 3)
    summary["cost"] = cost_section(variable, fixed, tally.enqueued)
    return Judged(summary, verdict, output, finished)


def sweep(services: Services) -> list[Finalized]:
    """Finalize every open run that is drained or overdue (a safety net behind the fetchers' trigger).

    A run that did not move since the last sweep counted it gets its waiting links sent again.
    """
    done = []
    for lock in services.ledger.active_runs():
        before = services.ledger.get_run(lock.crawl, lock.run_id)
        result = finalize_run(lock.crawl, lock.run_id, services)
        if result is not None:
            done.append(result)
            continue
        after = services.ledger.get_run(lock.crawl, lock.run_id)
        if before is None or after is None or after.status != "running" or before.checked_done is None:
            continue
        if before.checked_done == after.checked_done:  # counted twice, a sweep apart, the same: stalled
            revive_waiting(services, lock.crawl, lock.run_id)
    return done


REVIVE_LIMIT = 100_000
"""Waiting links sent again at most per call (a stalled run of more is revived over several sweeps)."""


def revive_waiting(services: Services, crawl: str, run_id: str) -> int:
    """Send again every link claimed for the run and still waiting; return how many.

    A claim is sent by the page that made it, and sent again by that page's redelivery if it finds the
    link again; if it does not (the page failed on its last try, or changed), the claim would wait
    forever. A duplicate of a message still in the queue is harmless: it is looked up and skipped.
    """
    waiting: list[UrlTask] = []
    for entry in services.frontier.scan(run_id):
        if entry.result is None and entry.origin == "link":
            waiting.append(
                UrlTask(
                    url=entry.url,
                    depth=entry.depth,
                    origin="link",
                    parent=entry.parent,
                    again=True,
                    via=entry.via,
                    carry=dict(entry.carry) if entry.carry else None,
                )
            )
            if len(waiting) >= REVIVE_LIMIT:
                break
    if waiting:
        services.queue.send(crawl, run_id, waiting)
        logger.warning("waiting links sent again", extra={"crawl": crawl, "run_id": run_id, "links": len(waiting)})
    return len(waiting)


def run_summary(
    run: RunState,
    tally: RunTally,
    output: OutputSummary,
    verdict: Verdict,
    previous: RunState | None,
    *,
    finished: bool,
    spec_follow: Follow,
) -> dict[str, Any]:
    return {
        "crawl": run.crawl,
        "run_id": run.run_id,
        "status": "finished" if finished else "unfinished",
        "started_at": run.started_at,
        "finalized_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "spec_digest": run.spec_digest,
        "catalog_run": run.catalog_run,
        "pages": {
            "enqueued": tally.enqueued,
            "seeds": tally.seeds,
            "links": tally.links,
            "fetched": tally.fetched,
            "not_modified": tally.not_modified,
            "not_due": tally.not_due,
            "failed": tally.failed,
            "gone": tally.gone,
            "skipped": tally.skipped,
            "pending": max(0, tally.pending),
            "links_dropped": tally.dropped_links,
        },
        "limits": {
            "max_pages": {"limit": spec_follow.max_pages, "links_left": tally.capped_links},
            "max_depth": {"limit": spec_follow.max_depth, "links_left": tally.beyond_depth},
        },
        "records": {
            "total": output.records,
            "new": tally.records_new,
            "changed": tally.records_changed,
            "unchanged": tally.records_unchanged,
            "in_output": output.records,
            "duplicates_dropped": output.duplicates,
            "carried_missing": output.carried_missing,
            "fallback_keys": tally.fallback_keys,
            **({"by_type": output.types} if output.types else {}),
        },
        "failures": tally.failures.top(),
        "skips": tally.skips.top(),
        "blocked_hosts": {h: {"reason": b.reason, "urls_skipped": b.skipped} for h, b in tally.blocked.items()},
        "rejected": tally.rejected.top(),
        "null_rates": {k: round(v, 4) for k, v in tally.counts(output.records).null_rates().items()},
        "previous_run": {"run_id": previous.run_id, "records": previous.records} if previous else None,
        "verdict": {
            "healthy": verdict.healthy,
            "record_count_ratio": verdict.record_count_ratio,
            "error_rate": round(verdict.error_rate, 4),
            "alerts": [
                {"check": a.name, "message": a.message, "value": a.value, "threshold": a.threshold}
                for a in verdict.alerts
            ],
            "checks": [{"check": ch.name, "ok": ch.ok, "message": ch.message} for ch in verdict.checks],
        },
        "outputs": {"records": output.folder, "files": output.files, "bytes": output.bytes},
    }


def egress_section(spec: CrawlSpec, tally: RunTally, fixed_ips: tuple[str, ...]) -> dict[str, Any]:
    """The run's route (``egress``) and, with a pool, each proxy's pages, failures and ejection (``proxies``)."""
    proxies = {p.name: tally.proxies.get(p.name, ProxyTally()) for p in spec.request.proxies}
    for entry in spec.request.proxies:
        proxies[entry.name].tier = entry.tier
    section: dict[str, Any] = {"egress": egress_of(fixed_ips=fixed_ips, proxies=proxies)}
    if proxies:
        section["proxies"] = {name: p.to_json() for name, p in proxies.items()}
    return section


def previous_types(services: Services, previous: RunState | None) -> dict[str, int]:
    """The previous finished run's records per page type, from its summary (empty: none, or it had no types)."""
    if previous is None or previous.summary_key is None:
        return {}
    data = services.objects.get(previous.summary_key)
    if data is None:
        return {}
    types = json.loads(data).get("types") or {}
    return {str(kind): int(section["records"]) for kind, section in types.items()}


def types_section(counts: RunCounts, tally: RunTally, previous: dict[str, int]) -> dict[str, Any]:
    """Per page type: pages, records in the output, new/changed/unchanged, null rates, against the previous run."""
    section: dict[str, Any] = {}
    for kind, own in counts.by_type.items():
        pages = tally.types.get(kind, TypeTally())
        before = previous.get(kind)
        section[kind] = {
            "pages": pages.pages,
            "failed": pages.failed,
            "records": own.records,
            "new": pages.records_new,
            "changed": pages.records_changed,
            "unchanged": pages.records_unchanged,
            "items": own.items,
            "null_rates": {k: round(v, 4) for k, v in own.null_rates().items()},
            "previous_records": before,
            "record_count_ratio": round(own.records / before, 4) if before else None,
            "carry_stale": pages.carry_stale,
            "carry_dropped": dict(pages.carry_dropped),
        }
    return section


def cost_section(variable: RunUsage, fixed: RunUsage, pages: int) -> dict[str, Any]:
    """The run's estimated AWS cost at list prices: per line, what grows with pages (per million) and what is fixed."""
    grows, once = variable.price(), fixed.price()
    return {
        "estimated_usd": round(grows["total"] + once["total"], 6),
        "per_million_pages_usd": round(grows["total"] / max(1, pages) * 1e6, 2),
        "fixed_per_run_usd": round(once["total"], 6),
        "lines_usd": {k: round(grows[k] + once[k], 6) for k in grows if k != "total"},
        "usage": {"per_page_work": variable.as_dict(), "per_run": fixed.as_dict()},
        "prices": f"{US_EAST_1.region}, on-demand list prices read {US_EAST_1.read_on}",
    }


def summary_json(summary: dict[str, Any]) -> bytes:
    return json.dumps(summary, indent=2, sort_keys=True).encode()


def emit_metrics(
    run: RunState, tally: RunTally, output: OutputSummary, verdict: Verdict, *, estimated_usd: float
) -> None:
    """One EMF document per run with the crawl as the only dimension, and one alert log event per failed check.

    ``estimated_usd`` is the summary's cost estimate, so the dashboard shows what each run cost.
    """
    values: dict[RunMetric, float] = {
        RunMetric.RECORDS_PER_RUN: output.records,
        RunMetric.ERROR_RATE: verdict.error_rate,
        RunMetric.RUN_HEALTHY: 1.0 if verdict.healthy else 0.0,
        RunMetric.PAGES_FETCHED: tally.fetched,
        RunMetric.PAGES_NOT_MODIFIED: tally.not_modified,
        RunMetric.PAGES_NOT_DUE: tally.not_due,
        RunMetric.PAGES_FAILED: tally.failed,
        RunMetric.PAGES_SKIPPED: tally.skipped,
        RunMetric.HOSTS_BLOCKED: len(tally.blocked),
        RunMetric.RECORDS_NEW: tally.records_new,
        RunMetric.RECORDS_CHANGED: tally.records_changed,
        RunMetric.RUN_DURATION: (datetime.now(UTC) - datetime.fromisoformat(run.started_at)).total_seconds(),
        RunMetric.ESTIMATED_COST: estimated_usd,
    }
    if verdict.record_count_ratio is not None:
        values[RunMetric.RECORD_COUNT_RATIO] = verdict.record_count_ratio
    if tally.proxies:
        values[RunMetric.PROXIES_EJECTED] = sum(p.ejected for p in tally.proxies.values())
    metrics.add_dimension(CRAWL_DIMENSION, run.crawl)
    for name, value in values.items():
        metrics.add_metric(name=name.value, unit=UNITS[name].value, value=value)
    metrics.add_metadata("run_id", run.run_id)
    metrics.flush_metrics()
    for alert in verdict.alerts:
        logger.error(
            "run alert",
            extra={
                "event": "alert",
                "crawl": run.crawl,
                "run_id": run.run_id,
                "check": alert.name,
                "value": alert.value,
                "threshold": alert.threshold,
                "detail": alert.message,
            },
        )

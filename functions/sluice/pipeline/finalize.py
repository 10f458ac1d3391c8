"""Finalize a run: count it, write its output, judge it, emit its metrics, release its lock, in shards.

Counting is exact and happens here, once: every URL's result is read back from the frontier, by
finalize shards (ranges of the URL-hash keyspace, ``sluice.domain.shards``), each its own task:
run on a thread pool here, or as queued tasks on AWS (``Services.finalize_shards``), with the same
code (``sluice.pipeline.finalize_shards``). An attempt has three phases: **scan** (the run's first
scan, every shard's counts, plan and key digests), **keys** (per key section, the keys two shards
share and the records gone; and the run's second scan), **write** (each shard's records files), then
the **combine** here: index, manifest, summary, metrics, lock.

A run is drained when every seed and every claimed link has its result. A drained run has no
URL in flight, so nothing can add to it; but a scan is not a snapshot, and a page counted
mid-scan could have claimed a link in a shard already read. So the scan is repeated: every shard
of the second scan starts after every shard of the first is done (the phases are in order), and
when the second scan finds exactly as many URLs as a first that found every one done, nothing
happened in between, and the first scan's counts are the run's. Finalizing happens once per run
(a conditional status change guards it). A run past its deadline is finalized as it stands, as
unfinished, by the sweep. A shard failing past its retries, a run needing more shards than the
stack allows, or finalizing that never completes ends the run **failed**, with the reason.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sluice.domain.cost import US_EAST_1, RunUsage
from sluice.domain.egress import ProxyTally, egress_of
from sluice.domain.layout import summary_key, work_prefix
from sluice.domain.runs import RunState
from sluice.domain.shards import MAX_SHARDS, RunTooLarge, Shard, shard_count
from sluice.domain.tally import RunTally, TypeTally, merge, run_tally_from_plain
from sluice.domain.verdict import RunCounts, Verdict, judge
from sluice.messages import ShardTask, UrlTask
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics
from sluice.pipeline.finalize_shards import KEYS, SCAN, WRITE, Attempt, index_rows, prepare, results, run_task
from sluice.pipeline.output import OutputPlan, OutputSummary, write_index_and_manifest
from sluice.pipeline.services import Services
from sluice.pipeline.sitemapseeds import load_report
from sluice.pipeline.usage import UsageCounter
from sluice.spec import CrawlSpec, Follow

FINALIZING_STALE_S = 20 * 60
"""A run still finalizing after this long lost its finalizer (a shard past its retries, a lost task): it is
finalized again, at most ``Tuning.finalize_attempts`` times in all; then it ends failed."""
DONE = "done"


class ShardFailed(RuntimeError):
    """A shard task failed on its last try: the run ends failed, with this as the reason."""


@dataclass(frozen=True, slots=True)
class Finalized:
    crawl: str
    run_id: str
    summary: dict[str, Any]
    summary_key: str


def finalize_run(
    crawl: str,
    run_id: str,
    services: Services,
    *,
    force: bool = False,
    stopped: str | None = None,
    swept: bool = False,
) -> Finalized | None:
    """Finalize a run if it is drained (or overdue, or ``force``); None if it is not time yet, already done,
    or handed to queued shard tasks (the task that completes the last phase finishes the run).

    ``stopped`` says why a forced run ended early; the summary carries it. ``swept``: the sweep asks.
    """
    run = services.ledger.get_run(crawl, run_id)
    if run is None or run.status == "finished":
        return None
    if run.status == "finalizing":
        if not (force or run.finalizing_for() > FINALIZING_STALE_S):
            return None
        # An attempt died mid-way: every output key is rewritten whole, so doing it again is safe; but not forever.
        tried = _attempts(services, run)
        if len(tried) >= services.tuning.finalize_attempts:
            return fail_run(
                services,
                run,
                f"finalizing did not complete in {len(tried)} attempts (the last, {tried[-1]}, began "
                f"{run.finalizing_for() / 60:.0f} minutes ago): a shard task keeps failing or timing out",
            )
        logger.warning("finalizing again after an interrupted finalizer", extra={"crawl": crawl, "run_id": run_id})
        return _begin(services, run, force=True, stopped=stopped, swept=swept)
    if force or run.overdue:
        if not services.ledger.begin_finalizing(crawl, run_id):
            return None
        return _begin(services, run, force=True, stopped=stopped, swept=swept)
    if run.seeding:
        return None
    return _begin(services, run, force=False, stopped=stopped, swept=swept)


def _begin(services: Services, run: RunState, *, force: bool, stopped: str | None, swept: bool) -> Finalized | None:
    """Start a finalizing attempt: its shard count from the run's size, then its first phase."""
    pages = run.seeds + services.frontier.progress(run.run_id).claimed
    tuning = services.tuning
    try:
        count = shard_count(pages, tuning.finalize_shard_pages, tuning.finalize_max_shards)
    except RunTooLarge as exc:
        if not force and not services.ledger.begin_finalizing(run.crawl, run.run_id):
            return None
        return fail_run(services, run, str(exc))
    attempt = Attempt(run.crawl, run.run_id, f"{int(time.time())}-{uuid.uuid4().hex[:6]}", count, force, stopped, swept)
    if force:
        _record_attempt(services, run, attempt.attempt)
    return _drive(services, attempt, SCAN)


def _drive(services: Services, attempt: Attempt, phase: str | None) -> Finalized | None:
    """Run the attempt's phases in order here (on a thread pool), or start the next on queued shard tasks.

    A run of one shard (at most ``finalize_shard_pages`` pages) is finalized here, queue or not: its one
    task a phase is this invocation's own work, and a start that closes a small run finds it closed."""
    while phase is not None:
        if phase == DONE:
            return _combine(services, attempt)
        if services.finalize_shards is not None and attempt.count > 1:
            services.finalize_shards.start(attempt.as_plain(), phase)
            logger.info(
                "finalize phase started",
                extra={"crawl": attempt.crawl, "run_id": attempt.run_id, "phase": phase, "shards": attempt.count},
            )
            return None
        run = services.ledger.get_run(attempt.crawl, attempt.run_id)
        if run is None:
            return None
        try:
            run_inline(services, run, services.spec(attempt.crawl), attempt, phase)
        except ShardFailed as exc:
            return fail_run(services, run, str(exc))
        phase = _next(services, attempt, phase)
    return None


def run_inline(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt, phase: str) -> None:
    """Every shard of a phase on a thread pool, each tried as often as a queued task is received."""
    tries = max(1, services.tuning.max_receive_count)

    def one(index: int) -> None:
        for attempt_number in range(1, tries + 1):
            try:
                run_task(services, run, spec, attempt, phase, index)
                return
            except Exception as exc:
                logger.warning(
                    "finalize shard failed",
                    extra={
                        "crawl": run.crawl,
                        "run_id": run.run_id,
                        "phase": phase,
                        "shard": index,
                        "try": attempt_number,
                    },
                    exc_info=True,
                )
                if attempt_number == tries:
                    raise ShardFailed(shard_failure(phase, index, attempt.count, tries, exc)) from exc

    with ThreadPoolExecutor(max_workers=max(1, services.tuning.finalize_workers)) as pool:
        for _ in pool.map(one, range(attempt.count)):
            pass


def shard_failure(phase: str, index: int, count: int, tries: int, exc: BaseException) -> str:
    return f"finalize shard {index} of {count} ({phase}) failed {tries} times: {type(exc).__name__}: {exc}"[:500]


def shard_completed(services: Services, attempt: Attempt, phase: str, index: int) -> Finalized | None:
    """A queued shard task is done: the completion that makes its phase whole moves the attempt on (once)."""
    runner = services.finalize_shards
    if runner is None or not runner.done(attempt.as_plain(), phase, index, attempt.count):
        return None
    return _drive(services, attempt, _next(services, attempt, phase))


def queued_shard(services: Services, task: ShardTask, *, last_try: bool) -> Finalized | None:
    """One queued shard task: run it, record it done, and move the attempt on if it completed its phase.

    A task failing on its queue's last receive ends the run failed (its reason in the summary) rather than
    leaving it to the dead-letter queue and the sweep; an earlier failure is raised, so the queue retries it."""
    attempt = Attempt.from_plain(task.attempt_plain())
    run = services.ledger.get_run(attempt.crawl, attempt.run_id)
    if run is None or run.status == "finished":
        return None  # a task of an attempt the run no longer needs
    try:
        run_task(services, run, services.spec(attempt.crawl), attempt, task.phase, task.shard)
    except Exception as exc:
        if not last_try:
            raise
        logger.exception("finalize shard failed on its last try", extra={"crawl": run.crawl, "run_id": run.run_id})
        tries = services.tuning.max_receive_count
        return fail_run(services, run, shard_failure(task.phase, task.shard, attempt.count, tries, exc))
    return shard_completed(services, attempt, task.phase, task.shard)


def _next(services: Services, attempt: Attempt, phase: str) -> str | None:
    """What follows a phase whose every shard is done: the next phase (its index of inputs written), the
    combine, or nothing (not yet)."""
    following = _following(services, attempt, phase)
    if following in (KEYS, WRITE):
        prepare(services.objects, attempt, following)
    return following


def _following(services: Services, attempt: Attempt, phase: str) -> str | None:
    if phase == SCAN:
        if attempt.force:
            return KEYS
        run = services.ledger.get_run(attempt.crawl, attempt.run_id)
        if run is None or run.status != "running":
            return None
        counted = _tally(services, attempt, run.seeds)
        if not counted.drained:
            if attempt.swept and run.checked_done is not None and run.checked_done == counted.done:
                # counted twice, a sweep apart, the same: stalled (a bounded share of its shards a sweep)
                revive_waiting(services, run.crawl, run.run_id, shards=attempt.count)
            services.ledger.checked(run.crawl, run.run_id, counted.done)
            pending = counted.pending
            logger.info("run not drained yet", extra={"crawl": run.crawl, "run_id": run.run_id, "pending": pending})
            return None
        return KEYS
    if phase == KEYS:
        if attempt.force:
            return WRITE
        first = sum(int(r["entries"]) for r in results(services.objects, attempt, SCAN))
        second = sum(int(r["entries"]) for r in results(services.objects, attempt, KEYS))
        if first != second:
            logger.info("run still moving: finalizing later", extra={"crawl": attempt.crawl, "run_id": attempt.run_id})
            return None
        if not services.ledger.begin_finalizing(attempt.crawl, attempt.run_id):
            return None
        run = services.ledger.get_run(attempt.crawl, attempt.run_id)
        if run is not None:
            _record_attempt(services, run, attempt.attempt)  # finalizing from here: it counts as an attempt
        return WRITE
    return DONE


def _tally(services: Services, attempt: Attempt, seeds: int) -> RunTally:
    counted = RunTally(seeds=seeds)
    for result in results(services.objects, attempt, SCAN):
        merge(counted, run_tally_from_plain(result["tally"]))
    return counted


def _attempts_key(run: RunState) -> str:
    return f"{work_prefix(run.crawl, run.run_id)}finalize/attempts.json"


def _attempts(services: Services, run: RunState) -> list[str]:
    """The attempts begun while the run was finalizing (only the sweep begins another, one at a time)."""
    data = services.objects.get(_attempts_key(run))
    return [str(a) for a in json.loads(data)] if data else []


def _record_attempt(services: Services, run: RunState, attempt: str) -> None:
    tried = _attempts(services, run)
    services.objects.put(_attempts_key(run), json.dumps([*tried, attempt]).encode(), "application/json")


@dataclass(frozen=True, slots=True)
class Judged:
    """A run's output written and judged: its summary (not yet stored), verdict and output."""

    summary: dict[str, Any]
    verdict: Verdict
    output: OutputSummary
    finished: bool
    tally: RunTally


def rebuild_output(services: Services, run: RunState, spec: CrawlSpec, *, stopped: str | None = None) -> Judged:
    """Count a run from its URLs' results and write its output and verdict again, as finalizing does.

    ``sluice reextract`` calls it once the run's results hold the re-extracted records: the same shards,
    run here on a thread pool, rewrite every output key whole, from the results, as the finalizer writes it."""
    pages = run.seeds + services.frontier.progress(run.run_id).claimed
    count = shard_count(pages, services.tuning.finalize_shard_pages, services.tuning.finalize_max_shards)
    attempt = Attempt(run.crawl, run.run_id, f"rebuild-{int(time.time())}-{uuid.uuid4().hex[:6]}", count, True, stopped)
    for phase in (SCAN, KEYS, WRITE):
        if phase != SCAN:
            prepare(services.objects, attempt, phase)
        run_inline(services, run, spec, attempt, phase)
    return _judge(services, run, spec, attempt)


def _combine(services: Services, attempt: Attempt) -> Finalized | None:
    """Every shard written: the run's page index, manifest, summary and metrics; then its lock is released."""
    run = services.ledger.get_run(attempt.crawl, attempt.run_id)
    if run is None or run.status == "finished":
        return None
    crawl, run_id = run.crawl, run.run_id
    judged = _judge(services, run, services.spec(crawl), attempt)
    summary, verdict, output = judged.summary, judged.verdict, judged.output
    key = summary_key(crawl, run_id)
    services.objects.put(key, summary_json(summary), "application/json")
    emit_metrics(run, judged.tally, output, verdict, estimated_usd=summary["cost"]["estimated_usd"])
    services.ledger.finish(
        crawl, run_id, healthy=verdict.healthy, complete=judged.finished, records=output.records, summary_key=key
    )
    logger.info(
        "run finalized",
        extra={"crawl": crawl, "run_id": run_id, "healthy": verdict.healthy, "shards": attempt.count},
    )
    return Finalized(crawl, run_id, summary, key)


def _judge(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt) -> Judged:
    """The shards' results combined: the run's tally, its output (index and manifest written), its verdict."""
    crawl, run_id, objects = run.crawl, run.run_id, services.objects
    started = time.monotonic()
    tuning = services.tuning
    stopped = attempt.stopped
    tally = RunTally(seeds=run.seeds)
    usage = UsageCounter(run_id=run_id)
    shard_s = 0.0
    for result in results(objects, attempt, SCAN):
        merge(tally, run_tally_from_plain(result["tally"]))
        usage.merge(result["usage"])
        shard_s += float(result["seconds"])
    previous_records = gone_records = 0
    for result in results(objects, attempt, KEYS):
        previous_records += int(result["previous"])
        gone_records += int(result["gone"])
        shard_s += float(result["seconds"])
    written = list(results(objects, attempt, WRITE))
    shard_s += sum(float(r["seconds"]) for r in written)
    plan = OutputPlan(crawl, run_id, run.catalog_run, typed=spec.types is not None)
    output = write_index_and_manifest(objects, plan, written, index_rows(objects, attempt, written))
    finished = tally.drained and stopped is None  # a run stopped early is unfinished, however little it had
    previous = services.ledger.latest_finished(crawl, run_id)
    gone = (previous_records, gone_records) if run.catalog_run is not None else None
    by_type = {kind: output.types.get(kind, 0) for kind in spec.types} if spec.types is not None else None
    previous_by_type = previous_types(services, previous) if spec.types is not None else None
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
        summary["sitemaps"] = sitemaps  # None: the start never read them
    if spec.recrawl is not None:
        # Pages not due, counted apart by what said so: a sitemap's lastmod, or the recrawl schedule.
        by_schedule = tally.not_due_scheduled
        summary["pages"]["not_due_by"] = {"sitemap": tally.not_due - by_schedule, "schedule": by_schedule}
    finalize_s = shard_s + time.monotonic() - started
    variable, fixed = usage.usage(
        tuning,
        output,
        seeds=run.seeds,
        concurrency=spec.politeness.concurrency,
        catalog=run.catalog_run is not None,
        finalize_s=finalize_s,
        shards=attempt.count,
    )
    summary["finalize_s"] = round(finalize_s, 3)
    summary["finalize_shards"] = attempt.count
    summary["cost"] = cost_section(variable, fixed, tally.enqueued)
    return Judged(summary, verdict, output, finished, tally)


def fail_run(services: Services, run: RunState, reason: str) -> Finalized:
    """End a run failed: a summary that says why, the run-failed metric (its alarm pages), the lock released.

    What the run collected stays where it is (its URLs' results, its parts): once the cause is fixed,
    ``sluice reextract`` or a new run can build on them (docs/operations.md)."""
    crawl, run_id = run.crawl, run.run_id
    key = summary_key(crawl, run_id)
    summary: dict[str, Any] = {
        "crawl": crawl,
        "run_id": run_id,
        "status": "failed",
        "failed": reason,
        "started_at": run.started_at,
        "finalized_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "spec_digest": run.spec_digest,
        "catalog_run": run.catalog_run,
        "pages": {"seeds": run.seeds},
        "verdict": {
            "healthy": False,
            "record_count_ratio": None,
            "error_rate": None,
            "alerts": [{"check": "finalize", "message": reason, "value": None, "threshold": None}],
            "checks": [{"check": "finalize", "ok": False, "message": reason}],
        },
    }
    services.objects.put(key, summary_json(summary), "application/json")
    metrics.add_dimension(CRAWL_DIMENSION, crawl)
    metrics.add_metric(name=RunMetric.RUN_FAILED.value, unit=UNITS[RunMetric.RUN_FAILED].value, value=1.0)
    metrics.add_metric(name=RunMetric.RUN_HEALTHY.value, unit=UNITS[RunMetric.RUN_HEALTHY].value, value=0.0)
    metrics.add_metadata("run_id", run_id)
    metrics.flush_metrics()
    logger.error(
        "run failed",
        extra={"event": "alert", "crawl": crawl, "run_id": run_id, "check": "finalize", "detail": reason},
    )
    services.ledger.finish(crawl, run_id, healthy=False, complete=False, records=0, summary_key=key)
    return Finalized(crawl, run_id, summary, key)


def sweep(services: Services) -> list[Finalized]:
    """Finalize every open run that is drained or overdue (a safety net behind the fetchers' trigger).

    A run that did not move since the last sweep counted it gets its waiting links sent again.
    """
    done = []
    for lock in services.ledger.active_runs():
        result = finalize_run(lock.crawl, lock.run_id, services, swept=True)
        if result is not None:
            done.append(result)
    return done


REVIVE_LIMIT = 100_000
"""Waiting links sent again at most per call (a stalled run of more is revived over several sweeps)."""
REVIVE_ENTRIES = 400_000
"""URL entries a sweep's call reads at most before it stops after a whole shard (about a minute of Queries):
a 10M-page run is read over several sweeps, shard by shard from where the last call stopped."""


def revive_waiting(
    services: Services, crawl: str, run_id: str, *, shards: int | None = None, budget: int | None = REVIVE_ENTRIES
) -> int:
    """Send again the links claimed for the run and still waiting, shard by shard; return how many were sent.

    A claim is sent by the page that made it, and sent again by that page's redelivery if it finds the
    link again; if it does not (the page failed on its last try, or changed), the claim would wait
    forever. A duplicate of a message still in the queue is harmless: it is looked up and skipped.

    One call reads whole finalize shards (``shards`` of them, or as many as finalizing the run takes),
    from the shard after the one the last call ended on (``finalize/revive.json``), until it has read
    ``budget`` entries (None: every shard, once) or found ``REVIVE_LIMIT`` waiting links; so a call
    is bounded however large the run, and a stalled run is revived whole over consecutive sweeps.
    """
    if shards is None:
        run = services.ledger.get_run(crawl, run_id)
        pages = (run.seeds if run is not None else 0) + services.frontier.progress(run_id).claimed
        shards = shard_count(pages, services.tuning.finalize_shard_pages, MAX_SHARDS)
    cursor_key = f"{work_prefix(crawl, run_id)}finalize/revive.json"
    saved = json.loads(services.objects.get(cursor_key) or b"{}")
    first = int(saved["next"]) if saved.get("shards") == shards else 0
    waiting: list[UrlTask] = []
    read, index = 0, first
    while True:
        for entry in services.frontier.scan(run_id, shard=Shard(index, shards)):
            read += 1
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
                    break  # this shard is not read to its end: the next call starts with it again
        else:
            index = (index + 1) % shards
            if index != first and (budget is None or read < budget):
                continue
        break
    if shards > 1:
        services.objects.put(cursor_key, json.dumps({"shards": shards, "next": index}).encode(), "application/json")
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
        RunMetric.RUN_FAILED: 0.0,  # a run that ends failed emits 1 (fail_run): its alarm's datapoints
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

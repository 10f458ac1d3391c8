"""Finalize a run: count it, write its output, judge it, emit its metrics, release its lock, in shards.

Counting is exact and happens here, once: every URL's result is read back from the frontier, by
finalize shards (ranges of the URL-hash keyspace, ``sluice.domain.shards``), each its own task:
run on a thread pool here, or as queued tasks on AWS (``Services.finalize_shards``), with the same
code (``sluice.pipeline.finalize.shards``). An attempt has three phases: **scan** (the run's first
scan, every shard's counts, plan and key digests), **keys** (per key section, the keys two shards
share and the records gone; and the run's second scan, left out when the caller knows the run
settled: ``Attempt.settled``), **write** (each shard's records files), then
the **combine** (``sluice.pipeline.finalize.combine``): index, manifest, summary
(``finalize_summary``), metrics (``run_metrics``), lock. This module drives the phases in order;
a stalled run's waiting links are sent again by ``sluice.pipeline.finalize.revive``.

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
import uuid
from concurrent.futures import ThreadPoolExecutor

from sluice.domain.layout import work_prefix
from sluice.domain.runs import RunState
from sluice.domain.shards import RunTooLarge, shard_count
from sluice.domain.tally import RunTally, merge, run_tally_from_plain
from sluice.messages import ShardTask
from sluice.observability import logger
from sluice.pipeline.finalize.combine import Finalized, Judged, combine, fail_run, judge_attempt
from sluice.pipeline.finalize.revive import revive_waiting
from sluice.pipeline.finalize.shards import KEYS, SCAN, WRITE, Attempt, prepare, results, run_task
from sluice.pipeline.services import Services
from sluice.spec import CrawlSpec

__all__ = [
    "Finalized",
    "Judged",
    "fail_run",
    "finalize_run",
    "queued_shard",
    "rebuild_output",
    "revive_waiting",
    "sweep",
]

FINALIZING_STALE_S = 20 * 60
"""A run still finalizing after this long lost its finalizer (a shard past its retries, a lost task): it is
finalized again, at most ``Tuning.finalize_attempts`` times in all; then it ends failed."""
DONE = "done"


class ShardFailed(RuntimeError):
    """A shard task failed on its last try: the run ends failed, with this as the reason."""


def finalize_run(
    crawl: str,
    run_id: str,
    services: Services,
    *,
    force: bool = False,
    stopped: str | None = None,
    swept: bool = False,
    settled: bool = False,
) -> Finalized | None:
    """Finalize a run if it is drained (or overdue, or ``force``); None if it is not time yet, already done,
    or handed to queued shard tasks (the task that completes the last phase finishes the run).

    ``stopped`` says why a forced run ended early; the summary carries it. ``swept``: the sweep asks.
    ``settled``: the caller knows nothing can add to the run meanwhile (no page in flight, no retry pending:
    the local runner with its queue empty), so one scan counts it (``Attempt.settled``).
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
    return _begin(services, run, force=False, stopped=stopped, swept=swept, settled=settled)


def _begin(
    services: Services, run: RunState, *, force: bool, stopped: str | None, swept: bool, settled: bool = False
) -> Finalized | None:
    """Start a finalizing attempt: its shard count from the run's size, then its first phase."""
    pages = run.seeds + services.frontier.progress(run.run_id).claimed
    tuning = services.tuning
    try:
        count = shard_count(pages, tuning.finalize_shard_pages, tuning.finalize_max_shards)
    except RunTooLarge as exc:
        if not force and not services.ledger.begin_finalizing(run.crawl, run.run_id):
            return None
        return fail_run(services, run, str(exc))
    attempt = Attempt(
        run.crawl, run.run_id, f"{int(services.clock())}-{uuid.uuid4().hex[:6]}", count, force, stopped, swept, settled
    )
    if force:
        _record_attempt(services, run, attempt.attempt)
    return _drive(services, attempt, SCAN)


def _drive(services: Services, attempt: Attempt, phase: str | None) -> Finalized | None:
    """Run the attempt's phases in order here (on a thread pool), or start the next on queued shard tasks.

    A run of one shard (at most ``finalize_shard_pages`` pages) is finalized here, queue or not: its one
    task a phase is this invocation's own work, and a start that closes a small run finds it closed."""
    while phase is not None:
        if phase == DONE:
            return combine(services, attempt)
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
        if not attempt.settled:
            first = sum(int(r["entries"]) for r in results(services.objects, attempt, SCAN))
            second = sum(int(r["entries"]) for r in results(services.objects, attempt, KEYS))
            if first != second:
                logger.info(
                    "run still moving: finalizing later", extra={"crawl": attempt.crawl, "run_id": attempt.run_id}
                )
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


def rebuild_output(services: Services, run: RunState, spec: CrawlSpec, *, stopped: str | None = None) -> Judged:
    """Count a run from its URLs' results and write its output and verdict again, as finalizing does.

    ``sluice reextract`` calls it once the run's results hold the re-extracted records: the same shards,
    run here on a thread pool, rewrite every output key whole, from the results, as the finalizer writes it."""
    pages = run.seeds + services.frontier.progress(run.run_id).claimed
    count = shard_count(pages, services.tuning.finalize_shard_pages, services.tuning.finalize_max_shards)
    attempt = Attempt(
        run.crawl, run.run_id, f"rebuild-{int(services.clock())}-{uuid.uuid4().hex[:6]}", count, True, stopped
    )
    for phase in (SCAN, KEYS, WRITE):
        if phase != SCAN:
            prepare(services.objects, attempt, phase)
        run_inline(services, run, spec, attempt, phase)
    return judge_attempt(services, run, spec, attempt)


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

"""A crawl run on the local store: the pipeline's own steps, a SQLite file and a folder.

The runner plays what AWS plays in production: EventBridge (it starts the run), the SQS event
source mapping (workers receive batches, visit them with the fetcher's step, delete what
succeeded and leave the rest to come back after their visibility), and the finalizer. Workers
are tasks on an event loop, each with a container of its own as a Lambda fetcher has: on this
process's loop, or spread over worker processes (``processes``, :mod:`.processes`) while this
one watches the run and finalizes it. The spec's per-host limits hold across them the way they
hold across the fleet (the queue gives a host to one worker at a time, the host book hands its
state on). Everything is durable after every batch: kill the process at any point and the next
``sluice run`` of the same spec resumes the run, fetching no page that was done.
"""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.config import DEFAULT, StackConfig

from sluice import defaults
from sluice.adapters.local import LocalStore
from sluice.collector import collected_rarely
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.layout import manifest_key, records_prefix, summary_key, work_prefix
from sluice.domain.runs import RunState
from sluice.domain.summary import RunSummary
from sluice.domain.tally import RunTally

# The fetcher's transport (aiohttp, httpx: about 0.23 CPU-s) is imported by a process's first request, lazily so
# that a Lambda's cold start does not pay it. A local run imports it with its runner instead, before the run
# starts and before its worker processes fork (each inherits it, where each imported it on its first request):
# a run's first pages no longer wait on it while every host waits on them.
from sluice.fetch import transport as _fetch_transport  # noqa: F401
from sluice.messages import StartEvent
from sluice.observability import logger
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.finalize.revive import revive_waiting
from sluice.pipeline.services import Services, Tuning
from sluice.pipeline.start.fanout import StartFailed, start_run
from sluice.pipeline.start.seedfile import upload_seed_file
from sluice.pipeline.visit.container import Container
from sluice.spec import CrawlSpec
from sluice_tools.runner.parquet import with_parquet
from sluice_tools.runner.processes import VISIBILITY_S, Batches, WorkerPlan, WorkerProcesses, split
from sluice_tools.runner.secrets import local_credentials
from sluice_tools.runner.session import (
    FlagsDiffer,
    LocalRun,
    Progress,
    RunView,
    exclusive,
    fetch_flags,
    logs_to,
    remember_flags,
    remembered_flags,
)

RUN_TIME_LIMIT_S = 6 * 3600.0
"""A local run that has not drained in six hours is stopped and finalized as unfinished."""
LOCAL_EARLY_WRITE_URLS = 20
"""A local batch of this many URLs or more is written in chunks while it fetches (``Tuning.early_write_urls``)."""
PROGRESS_EVERY_S = 0.2
WATCH_EVERY_S = 0.05
"""How often the drain looks whether the run is quiet (and finalizes it) without being woken: a batch that ends,
of this process or of a worker process, wakes it at once (the last batch's end is when a run goes quiet);
messages coming back after their visibility are seen by looking."""
LOCAL_FINALIZE_SHARD_PAGES = 2_500
"""A local run is finalized in shards of at most this many pages (``Tuning.finalize_shard_pages``; 50,000 on
Lambda, where each shard task is an invocation of its own). Here every task runs in this process, and a task
holds about 10 KB a page of its shard while it runs: small shards keep finalizing near 25 MB a task whatever
the run's size, for more output files (one set per shard) and no more CPU (docs/engine-experiments.md)."""
LOCAL_FINALIZE_WORKERS = 2
"""Shard tasks run at once here (``Tuning.finalize_workers``): what finalizing holds at most is this many tasks'."""


def batch_messages_checked(value: int) -> int:
    """``value`` if it is a batch a worker may receive; else ValueError naming the setting and its range."""
    top = defaults.LOCAL_BATCH_MESSAGES_MAX
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise ValueError(f"batch_messages must be a whole number from 1 to {top}, got {value!r}")
    return value


def _backlog_for(stack_backlog: int, batch_messages: int) -> int:
    """The stack's cap on a host's queued messages, raised to a batch (0, no cap, stays so)."""
    return 0 if stack_backlog == 0 else max(stack_backlog, batch_messages)


@dataclass(frozen=True, slots=True)
class Resumed:
    run: RunState
    done: int
    enqueued: int

    def describe(self) -> str:
        if self.run.status == "finalizing":
            return f"finishing run {self.run.run_id}: all {self.done} pages done, its output was being written"
        return f"resuming run {self.run.run_id}: {self.done} of {self.enqueued} pages done"


_STARTED_LOG = re.compile(r"-\d{8}T\d{6}\.jsonl")
"""The end of a command's log name while its run is not known to have ended: ``CRAWL-YYYYmmddTHHMMSS.jsonl``."""


def _killed_commands_logs(current: Path, crawl: str, run_id: str) -> list[Path]:
    """The logs commands killed in ``run_id`` left under their start times, oldest first (``current``, this
    command's own, not among them). A line of the run names it (the logs' compact JSON: ``"run_id":"RUN"``)."""
    mark = f'"run_id":"{run_id}"'
    found = []
    for path in sorted(current.parent.glob(f"{crawl}-*.jsonl")):
        if path == current or not _STARTED_LOG.fullmatch(path.name[len(crawl) :]):
            continue
        with path.open(encoding="utf-8", errors="replace") as text:
            if any(mark in line for line in text):
                found.append(path)
    return found


class LocalFleet:
    """Runs crawls of the specs in one folder on the local store in ``state_dir``."""

    def __init__(
        self,
        specs_dir: Path,
        state_dir: Path,
        *,
        workers: int = 4,
        processes: int = 1,
        batch_messages: int = defaults.LOCAL_BATCH_MESSAGES,
        allow_loopback: bool = False,
        config: StackConfig = DEFAULT,
        say: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.specs_dir, self.state_dir, self.workers = specs_dir, state_dir, max(1, workers)
        self.processes = max(1, processes)
        """Processes the workers are spread over (1: every worker on this process's event loop)."""
        self.batch_messages = batch_messages_checked(batch_messages)
        """Messages a worker receives at once: the runner's own (the stack's SQS batches are ``config.batch_size``)."""
        self._logs: Path | None = None
        self.config = config
        self.clock = clock
        """The pipeline's time (a bench or test plays nights a day apart with its own)."""
        self.tuning = Tuning(
            max_receive_count=config.max_receive_count,
            run_deadline_hours=config.run_deadline_hours,
            # Locally a returned message comes back in seconds, so a run with faults stays short.
            visibility_base_s=defaults.LOCAL_VISIBILITY_BASE_S,
            visibility_max_s=defaults.LOCAL_VISIBILITY_MAX_S,
            catalog_max_age_days=defaults.catalog_max_age_days(config.claim_ttl_days),
            allow_loopback=allow_loopback,
            # Local files: small reads cost nothing, so the finalizer's buffers stay small.
            output_span_bytes=1024 * 1024,
            output_readers=2,
            urls_per_message=config.urls_per_message,
            batch_size=config.batch_size,
            pack_receives=config.pack_receives,
            # A host's backlog holds at least a batch: else a batch of one host is cut at its backlog.
            host_backlog_messages=_backlog_for(config.host_backlog_messages, self.batch_messages),
            # Parts are files here: a batch is written in chunks while it fetches (visit/writer.py).
            early_write_urls=LOCAL_EARLY_WRITE_URLS,
            fetcher_memory_mb=config.fetcher.memory_mb,
            finalizer_memory_mb=config.finalizer.memory_mb,
            finalize_shard_pages=LOCAL_FINALIZE_SHARD_PAGES,
            finalize_workers=LOCAL_FINALIZE_WORKERS,
        )
        self.say = say or (lambda _: None)
        self.flags = fetch_flags(allow_loopback=allow_loopback)
        """The flags given that change what a run may fetch: kept with a new run, checked on a resume."""

    def run(self, spec: CrawlSpec, progress: Progress | None = None, *, restart: bool = False) -> LocalRun:
        """Run ``spec`` once (or finish the run an interrupted command left); logs go to ``state_dir/logs/``.

        Refused (:class:`~sluice_tools.runner.secrets.MissingSecrets`) before anything is opened when
        a secret the spec names is not in the environment."""
        local_credentials(spec)
        logs = self.state_dir / "logs" / f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
        logs.parent.mkdir(parents=True, exist_ok=True)
        self._logs = logs
        # Line by line when worker processes append to the same file (each line whole, none cut by another's).
        buffering = 1 if self.processes > 1 else -1
        fresh = not logs.exists()  # a killed command's, started in the same second, is appended to: kept
        try:
            with (
                exclusive(self.state_dir),
                logs.open("a", encoding="utf-8", buffering=buffering) as sink,
                logs_to(sink),
                collected_rarely(),
            ):
                store = self._open_store()
                try:
                    result = self._run(spec, store, progress, restart)
                    # Its parts and seed set were working data: the output holds what they held (S3 expires them).
                    # Removed while the Parquet copy is written (which reads the output alone): the removal waits
                    # on the file system, the copy on the CPU.
                    work = store.objects.path(work_prefix(spec.name, result.run_id))
                    cleanup = threading.Thread(target=shutil.rmtree, args=(work,), kwargs={"ignore_errors": True})
                    cleanup.start()
                    try:
                        result = with_parquet(result, spec, self.state_dir / "objects")
                    finally:
                        cleanup.join()
                finally:
                    store.close()
        except FlagsDiffer:
            if fresh:
                logs.unlink(missing_ok=True)  # refused before anything ran: no log to keep
            raise
        named = logs.with_name(f"{spec.name}-{result.run_id}.jsonl")
        # A command killed before its end left its log under the time it started: a resumed run takes those lines
        # back, first, so `sluice logs RUN` shows the run from its opening, not from "run resumed".
        earlier = _killed_commands_logs(logs, spec.name, result.run_id)
        if named.exists() or earlier:  # a resumed run appends to the log its first command started
            with named.open("a", encoding="utf-8") as out:
                for piece in [*earlier, logs]:
                    out.write(piece.read_text(encoding="utf-8"))
                    piece.unlink()
        else:
            logs.replace(named)
        result.outputs["logs"] = str(named)
        return result

    def _run(self, spec: CrawlSpec, store: LocalStore, progress: Progress | None, restart: bool) -> LocalRun:
        finalize_requests: deque[dict[str, object]] = deque()
        services = store.services(
            self.specs_dir,
            self.tuning,
            finalize_later=finalize_requests.append,
            continue_start=lambda _: None,
        )
        resumed = self._interrupted(spec, store, services, restart)
        if resumed is not None:
            run_id = resumed.run.run_id
            self.say(resumed.describe())
            logger.info("run resumed", extra={"crawl": spec.name, "run_id": run_id, "done": resumed.done})
            if resumed.run.status == "finalizing":
                # Every page was counted; the finalizer died writing the output: write it again, whole.
                finalize_run(spec.name, run_id, services, force=True)
                return self._result(spec, run_id, store, resumed)
            store.queue.release_in_flight(run_id)
            if resumed.run.seeding:
                event = StartEvent(crawl=spec.name, run_id=run_id, resumed=True)
                start_run(event, services, time_left=lambda: math.inf)
        else:
            upload_seed_file(store.objects, spec, self.specs_dir)
            try:
                run_id = start_run(StartEvent(crawl=spec.name), services, time_left=lambda: math.inf).run_id
                remember_flags(self.state_dir, spec.name, run_id, self.flags)
            except StartFailed as exc:  # the run is closed, with the reason in its summary
                self.say(str(exc))
                return self._result(spec, exc.run_id, store, None)
        drain = _Drain(self, spec, run_id, store, services, finalize_requests, progress)
        pool = self._worker_processes(spec, run_id, services) if self.processes > 1 else None
        try:
            asyncio.run(drain.run(pool))
        finally:
            if pool is not None:
                pool.stop()
        result = self._result(spec, run_id, store, resumed)
        if progress is not None:
            progress(RunView.final(result.summary))
        return result

    def _worker_processes(self, spec: CrawlSpec, run_id: str, services: Services) -> WorkerProcesses:
        """The workers, forked now (before this process's event loop), each process opening the state file anew."""
        assert self._logs is not None  # noqa: S101 - set by run()

        def batches(store: LocalStore) -> Batches:
            # Finalizing is the parent's: it sees the run quiet (nothing visible, nothing in flight) and finalizes.
            on_store = store.services(
                self.specs_dir,
                self.tuning,
                finalize_later=lambda _: None,
                continue_start=lambda _: None,
            )
            return Batches(run_id, store.queue, on_store, self.batch_messages)

        plan = WorkerPlan(self._logs, self._open_store, batches, self.tuning.allow_loopback)
        logger.info("worker processes", extra={"crawl": spec.name, "run_id": run_id, "processes": self.processes})
        return WorkerProcesses(plan, split(self.workers, self.processes))

    def _open_store(self) -> LocalStore:
        """The state folder's store (a connection of this process's own)."""
        store = LocalStore.open(
            self.state_dir,
            urls_per_message=self.config.urls_per_message,
            max_receive_count=self.config.max_receive_count,
            clock=self.clock,
        )
        store.queue.visibility_s = VISIBILITY_S  # the packing receives' too: hidden while their batch lives
        # Whole hosts after a batch's first, packing too: a host cut by a batch has its rest fetched alone after it.
        store.queue.whole_groups = True
        return store

    def _interrupted(self, spec: CrawlSpec, store: LocalStore, services: Services, restart: bool) -> Resumed | None:
        """The run a killed command left for this crawl, to resume (or, with ``restart``, to close as unfinished)."""
        lock = store.ledger.active_run(spec.name)
        if lock is None:
            return None
        run = store.ledger.get_run(spec.name, lock.run_id)
        if run is None:
            return None
        if restart:
            closed = finalize_run(spec.name, run.run_id, services, force=True)
            if closed is not None:
                self.say(f"abandoned run {run.run_id}: finalized as {closed.summary.status}")
            return None
        # A resume fetches what its run may fetch, no more and no less: other flags are refused here, before any
        # request (a run started with --allow-loopback, resumed without it, skipped every page left as loopback).
        started = remembered_flags(self.state_dir, spec.name, run.run_id)
        if started is not None and sorted(started) != sorted(self.flags):
            raise FlagsDiffer.of(run.run_id, started, self.flags)
        # Counted exactly from the run's URLs: the progress hints are hints (a killed batch leaves them off), and
        # "1700 of 100 pages done" counted the pages done against the seeds alone.
        tally = RunTally.of(run.seeds, store.frontier.scan(run.run_id))
        return Resumed(run, tally.done, tally.enqueued)

    def _result(self, spec: CrawlSpec, run_id: str, store: LocalStore, resumed: Resumed | None) -> LocalRun:
        key = summary_key(spec.name, run_id)
        raw = store.objects.get(key)
        if raw is None:
            raise RuntimeError(f"run {run_id} ended without a summary at {store.objects.location(key)}")
        summary = RunSummary.from_bytes(raw)
        dead = [{"message_id": i, "body": b[:500]} for i, b in store.queue.dead_letters(run_id)]
        outputs = {
            "records": store.objects.location(records_prefix(spec.name, run_id)),
            "manifest": store.objects.location(manifest_key(spec.name, run_id)),
            "summary": store.objects.location(key),
        }
        Path(outputs["records"]).mkdir(parents=True, exist_ok=True)  # an empty run still has its (empty) folder
        return LocalRun(spec.name, run_id, summary, dead, outputs, resumed.describe() if resumed else None)


class _Drain:
    """Workers receiving and visiting batches until the run is finalized (or its time runs out)."""

    def __init__(
        self,
        fleet: LocalFleet,
        spec: CrawlSpec,
        run_id: str,
        store: LocalStore,
        services: Services,
        requests: deque[dict[str, object]],
        progress: Progress | None,
    ) -> None:
        self.fleet, self.spec, self.run_id, self.store, self.services = fleet, spec, run_id, store, services
        self.requests, self.progress = requests, progress
        self.batches = Batches(run_id, store.queue, services, fleet.batch_messages, stop_look=None)
        """This loop's workers: the drain's end stops them (``Batches.stop``), idle ones at once."""
        self.pool: WorkerProcesses | None = None

    async def run(self, pool: WorkerProcesses | None = None) -> None:
        """Drain the run: on this loop's workers, or (``pool``) on worker processes while this loop watches."""
        self.pool = pool
        stop = asyncio.Event()
        containers = [Container(self.fleet.tuning.allow_loopback) for _ in range(0 if pool else self.fleet.workers)]
        workers = [asyncio.create_task(self.batches.work(c, stop.is_set)) for c in containers]
        # A worker process's batch that ends wakes the drain as one of this loop's does: the run's last batch
        # is seen at its end, not at the drain's next look (up to ``WATCH_EVERY_S`` later).
        unwatch = pool.watch_batches(asyncio.get_running_loop(), self.batches.ended_elsewhere) if pool else None
        try:
            await self._watch(stop)
        finally:
            if unwatch is not None:
                unwatch()
            stop.set()
            self.batches.stop()
            await asyncio.gather(*workers, return_exceptions=True)
            for container in containers:
                await container.aclose()

    async def _watch(self, stop: asyncio.Event) -> None:
        deadline = time.monotonic() + RUN_TIME_LIMIT_S
        shown = 0.0
        while time.monotonic() < deadline:
            if self.pool is not None:
                self.pool.check()
            if self.progress is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
                self._show()
                shown = time.monotonic()
            # Nothing left to receive: drained; or links wait that nobody sent (send them again);
            # or URLs went to the dead-letter queue (finalize as it stands).
            # Quiet is settled (no page in flight, no retry pending, no batch held): one scan counts the run.
            # A batch's request to finalize (``requests``) waits for it too: the batch still holds its messages
            # when it asks, and a run finalized with messages in flight is scanned twice to prove nothing moved.
            if self._quiet() and (await self._finalize(force=False, settled=True) or await self._revive_or_close()):
                break
            await self.batches.batch_end(WATCH_EVERY_S)
        else:
            await self._finalize(force=True)
        stop.set()
        if self.progress is not None:
            self._show()

    async def _revive_or_close(self) -> bool:
        """True once the run is closed; False if waiting links were sent again (keep draining)."""
        if await asyncio.to_thread(revive_waiting, self.services, self.spec.name, self.run_id, budget=None):
            return False
        return await self._finalize(force=True)

    def _quiet(self) -> bool:
        depth = self.store.queue.depth(self.run_id)
        return depth.visible + depth.in_flight == 0 and self.batches.busy == 0

    async def _finalize(self, *, force: bool, settled: bool = False) -> bool:
        self.requests.clear()
        run = self.store.ledger.get_run(self.spec.name, self.run_id)
        if run is None or run.status == "finished":
            return True
        finalized = await asyncio.to_thread(
            finalize_run, self.spec.name, self.run_id, self.services, force=force, settled=settled
        )
        return finalized is not None

    def _show(self) -> None:
        assert self.progress is not None  # noqa: S101 - only called with one
        run = self.store.ledger.get_run(self.spec.name, self.run_id)
        seeds = run.seeds if run is not None else 0
        p = self.store.frontier.progress(self.run_id)
        self.progress(RunView(done=p.done, enqueued=seeds + p.claimed, records=p.records, failed=p.failed))

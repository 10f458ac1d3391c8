"""Worker processes for a local run: each with its own event loop and its own connection to the state file.

One event loop caps a local run at one core: fetching, parsing and writing a page cost about 2.9 CPU-ms,
so a broad crawl stopped near 350 pages a second whatever its hosts allowed. Here the run's workers are
spread over several processes, as a Lambda fleet spreads them over containers. They share nothing in
memory: the queue hands each host to one worker at a time across processes (a receive is one ``BEGIN
IMMEDIATE`` transaction), each batch's writes are the same transactions in the same order as in one
process, and SQLite (WAL) lets one writer in at a time, the others waiting out its short transaction.

The processes are forked before the parent's event loop exists, so they start at once without importing
anything again. Each dies with its parent (``PR_SET_PDEATHSIG``): a ``kill -9`` of ``sluice run`` leaves no
worker behind to write into the state the next command resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TextIO

from sluice.adapters.local import LocalStore
from sluice.adapters.local.queue import GroupShare, SqliteQueue
from sluice.collector import collected_rarely
from sluice.observability import logger
from sluice.pipeline.services import Services
from sluice.pipeline.visit.batch import visit_batch
from sluice.pipeline.visit.container import Container

VISIBILITY_S = 24 * 3600.0
"""A received message stays hidden while its worker lives; only a dead process leaves one behind,
and the next run releases those at once (so this is never waited out). Longer than a run may last:
a batch is never received by a second worker while its own still visits it, however slow its host
(a batch of 320 URLs at a 3 s crawl delay takes 16 minutes, past the 15 this was)."""
IDLE_WAIT_S = 0.02
IDLE_WAIT_MAX_S = 0.32
"""An idle worker asks the queue again after 20 ms, doubling up to this while it finds nothing (or at once
when a worker of its process ends a batch: the host that batch held is free, its links are queued)."""
STOP_LOOK_S = 0.02
"""How often an idle worker looks whether its run stopped, where nothing wakes it when it does
(:meth:`Batches.stop` not wired: the stop is only a flag to read). The run's own stop wakes idle workers
at once, in this process and in worker processes alike (a pipe the parent closes), so an idle worker's
backoff (up to :data:`IDLE_WAIT_MAX_S`) no longer delays the end of every run."""
PR_SET_PDEATHSIG = 1
STOP_WAIT_S = 30.0
"""How long the parent waits for its workers to see the stop and close their pools before it kills them."""


class WorkerDied(RuntimeError):
    """A worker process ended before the run did; the run is left as a killed command leaves it (resumable)."""


@dataclass(slots=True)
class Batches:
    """A worker's loop: receive a batch of the run, visit it with the fetcher's step, delete what succeeded
    (the rest comes back after its visibility), as the SQS event source does; in any process."""

    run_id: str
    queue: SqliteQueue
    services: Services
    batch_size: int
    """Messages a worker receives at once."""
    busy: int = field(default=0)
    """Batches being visited in this process now."""
    stop_look: float | None = STOP_LOOK_S
    """An idle worker looks at ``stopped`` this often; None where :meth:`stop` wakes it (the run's own stop)."""
    on_end: Callable[[], None] | None = None
    """Told when a batch of this process ends, after its messages were deleted (a worker process tells its parent,
    whose drain would otherwise see the run's last batch end only at its next look)."""
    _ended: asyncio.Event | None = field(default=None, init=False, repr=False)
    """Set (and replaced) when a batch of this process ends or the run stops: wakes its idle workers."""
    _stopping: bool = field(default=False, init=False, repr=False)

    def stop(self) -> None:
        """Stop every worker of this process: an idle one at once, a busy one when its batch ends."""
        self._stopping = True
        self._wake()

    async def work(self, container: Container, stopped: Callable[[], bool]) -> None:
        idle = IDLE_WAIT_S
        while not (self._stopping or stopped()):
            received = await asyncio.to_thread(self.queue.receive, self.run_id, self.batch_size, VISIBILITY_S)
            if not received:
                await self._idle(idle, stopped)
                idle = min(2 * idle, IDLE_WAIT_MAX_S)
                continue
            idle = IDLE_WAIT_S
            self.busy += 1
            try:
                results = await visit_batch(received, self.services, container)
                done = [r.receipt_handle for r in received if results.get(r.message_id) is None]
                await asyncio.to_thread(self.queue.delete, done)
            finally:
                self.busy -= 1
                self._wake()
                if self.on_end is not None:
                    self.on_end()

    async def _idle(self, seconds: float, stopped: Callable[[], bool]) -> None:
        """Wait ``seconds``, or less if a batch of this process ends or the run stops meanwhile."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while not (self._stopping or stopped()):
            left = end - loop.time()
            if left <= 0:
                return
            if self._ended is None:
                self._ended = asyncio.Event()
            look = left if self.stop_look is None else min(left, self.stop_look)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), look)
                return

    async def batch_end(self, seconds: float) -> None:
        """Wait until a batch of this process ends (or the run stops), ``seconds`` at most."""
        if self._ended is None:
            self._ended = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), seconds)

    def ended_elsewhere(self) -> None:
        """A batch of another process (a worker process) ended: wake what waits here as if one of ours had."""
        self._wake()

    def _wake(self) -> None:
        ended, self._ended = self._ended, None
        if ended is not None:
            ended.set()


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker process needs: its own store (a connection of its own) and the run's batches on it."""

    logs: Path
    open_store: Callable[[], LocalStore]
    batches: Callable[[LocalStore], Batches]
    allow_loopback: bool


def default_processes(workers: int) -> int:
    """One process a core this process may run on, at most one a worker (``sluice run`` without ``--processes``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, workers))


def split(workers: int, processes: int) -> list[int]:
    """``workers`` spread over at most ``processes`` processes, as evenly as they go (none left empty)."""
    processes = max(1, min(processes, workers))
    return [workers // processes + (1 if i < workers % processes else 0) for i in range(processes)]


class WorkerProcesses:
    """The run's worker processes: started together, stopped together, watched for one that died."""

    def __init__(self, plan: WorkerPlan, shares: list[int]) -> None:
        context = multiprocessing.get_context("fork")
        self._stop: Event = context.Event()
        # The wake: each worker watches the read end on its loop; the parent writing to (and closing) its end,
        # or dying, makes it readable in every worker at once.
        wake, self._wake_fd = os.pipe()
        # The workers' word that one of their batches ended: a byte each, read by the parent's drain (non-blocking
        # both ways: a full pipe already holds a word the parent has yet to read).
        self._ended_fd, told = os.pipe()
        os.set_blocking(self._ended_fd, False)
        os.set_blocking(told, False)
        parent = os.getpid()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # nothing buffered is written twice, once by each process
        self._processes: list[BaseProcess] = [
            context.Process(
                target=_worker_main,
                args=(
                    plan,
                    GroupShare(i, len(shares), sum(shares)),
                    n,
                    self._stop,
                    parent,
                    (wake, self._wake_fd),
                    (self._ended_fd, told),
                ),
                name=f"sluice-worker-{i}",
            )
            for i, n in enumerate(shares)
        ]
        try:
            for process in self._processes:
                process.start()
        finally:
            os.close(wake)
            os.close(told)  # the workers' alone: once every one has ended, the parent reads the pipe's end

    def watch_batches(self, loop: asyncio.AbstractEventLoop, ended: Callable[[], None]) -> Callable[[], None]:
        """Call ``ended`` on ``loop`` whenever a worker's batch ends; what stops the watch (before the loop closes)."""

        def readable() -> None:
            try:
                if not os.read(self._ended_fd, 4096):  # every worker ended: nothing more will come
                    loop.remove_reader(self._ended_fd)
            except BlockingIOError:
                return
            ended()

        loop.add_reader(self._ended_fd, readable)

        def unwatch() -> None:
            loop.remove_reader(self._ended_fd)

        return unwatch

    def check(self) -> None:
        """Raise :class:`WorkerDied` if a worker ended while the run goes on."""
        for process in self._processes:
            if not process.is_alive() and not self._stop.is_set():
                raise WorkerDied(
                    f"worker process {process.name} ended (exit code {process.exitcode}) before the run did; "
                    "run the same command again to resume"
                )

    def stop(self) -> None:
        """Ask every worker to finish its batch and close; kill those still there after :data:`STOP_WAIT_S`."""
        self._stop.set()
        if self._wake_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_fd, b"x")
            os.close(self._wake_fd)
            self._wake_fd = -1
        for process in self._processes:
            process.join(STOP_WAIT_S)
            if process.is_alive():
                process.kill()
                process.join()
        if self._ended_fd >= 0:
            os.close(self._ended_fd)
            self._ended_fd = -1


def _die_with(parent: int) -> None:
    """Be killed when the parent dies (Linux); elsewhere the worker notices at its next receive."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)


def _worker_main(
    plan: WorkerPlan,
    share: GroupShare,
    workers: int,
    stop: Event,
    parent: int,
    wake: tuple[int, int],
    ended: tuple[int, int],
) -> None:
    _die_with(parent)
    os.close(wake[1])  # the parent's end: held here too, a closed parent would never show as the wake
    os.close(ended[0])  # the parent's end of the other pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which stops the workers
    with plan.logs.open("a", encoding="utf-8", buffering=1) as sink:
        # One line at a time into the run's log (O_APPEND), so no line is cut by another process's.
        _log_to(sink)
        store = plan.open_store()
        store.queue.share = share  # hosts spread over the processes as their workers are, none holding more
        try:
            batches = plan.batches(store)
            batches.on_end = _teller(ended[1])
            with collected_rarely():  # as the parent's run is (sluice.collector)
                asyncio.run(_serve(plan, batches, workers, lambda: stop.is_set() or os.getppid() != parent, wake[0]))
        finally:
            store.close()
            os.close(wake[0])
            os.close(ended[1])


def _teller(fd: int) -> Callable[[], None]:
    """Tell the parent (a byte on ``fd``) that a batch ended; a full pipe already says so, a gone parent needs not."""

    def tell() -> None:
        with contextlib.suppress(OSError):
            os.write(fd, b"e")

    return tell


def _log_to(sink: TextIO) -> None:
    handler = logger.registered_handler
    if hasattr(handler, "setStream"):
        handler.setStream(sink)
    sys.stdout = sink


async def _serve(plan: WorkerPlan, batches: Batches, workers: int, stopped: Callable[[], bool], wake: int) -> None:
    loop = asyncio.get_running_loop()
    batches.stop_look = None if _watch(loop, wake, batches.stop) else STOP_LOOK_S
    containers = [Container(plan.allow_loopback) for _ in range(workers)]
    try:
        await asyncio.gather(*(batches.work(c, stopped) for c in containers))
    finally:
        with contextlib.suppress(OSError, NotImplementedError, ValueError):
            loop.remove_reader(wake)
        for container in containers:
            await container.aclose()


def _watch(loop: asyncio.AbstractEventLoop, wake: int, stop: Callable[[], None]) -> bool:
    """Call ``stop`` once when ``wake`` becomes readable; False if this loop cannot watch it (the workers then look)."""

    def woken() -> None:
        loop.remove_reader(wake)  # it stays readable: called once, not at every turn of the loop
        stop()

    try:
        loop.add_reader(wake, woken)
    except (OSError, NotImplementedError, ValueError):
        return False
    return True

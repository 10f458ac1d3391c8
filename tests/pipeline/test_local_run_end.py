"""The end of a local run: idle workers stop when the run does, not when their backoff next ends.

An idle worker asks the queue again after a backoff that doubles up to ``IDLE_WAIT_MAX_S``; it used to look at
the run's stop only then, so every run's end waited out the longest backoff of its idle workers. The run's stop
now wakes them (``Batches.stop`` in this process, a pipe the parent closes in worker processes). The tests make
the backoff an hour: a worker the stop does not wake would sleep through the test (it is then killed, and seen
so), and a worker asking the queue after the stop is counted.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from sluice.adapters.local import LocalStore
from sluice.pipeline.services import Services
from sluice.pipeline.visit.container import Container
from sluice.spec import parse_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner import processes
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.processes import Batches, WorkerPlan, WorkerProcesses

from .conftest import SpecData

RUN = "run-with-nothing-queued"
HOUR = 3600.0
BOUND_S = 60.0
"""What a test waits at most for a step that takes milliseconds when it works (a bound, not a measurement)."""


@pytest.fixture
def hour_long_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle workers back off an hour and look at ``stopped`` once an hour: only a wake ends their wait."""
    monkeypatch.setattr(processes, "IDLE_WAIT_S", HOUR)
    monkeypatch.setattr(processes, "IDLE_WAIT_MAX_S", HOUR)
    monkeypatch.setattr(processes, "STOP_LOOK_S", HOUR)
    monkeypatch.setattr(processes, "STOP_WAIT_S", BOUND_S)


class CountedReceives:
    """A store's queue whose receives are counted in memory every process shares (forked)."""

    def __init__(self) -> None:
        self.value = multiprocessing.get_context("fork").Value("i", 0)

    def batches(self, store: LocalStore) -> Batches:
        original = store.queue.receive

        def receive(*args: Any, **kwargs: Any) -> Any:
            with self.value.get_lock():
                self.value.value += 1
            return original(*args, **kwargs)

        store.queue.receive = receive  # type: ignore[method-assign]
        return Batches(RUN, store.queue, cast(Services, None), 10)

    @property
    def count(self) -> int:
        return int(self.value.value)


def _wait_for(condition: Any) -> None:
    for _ in range(int(BOUND_S / 0.01)):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("not reached")


def _spec_folder(tmp_path: Path, data: dict[str, Any]) -> Path:
    """A crawls folder holding ``data`` as ``ends.yaml``."""
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / "ends.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return crawls


def _run_within_bound(fleet: LocalFleet, data: dict[str, Any]) -> list[Any]:
    """``fleet.run`` on a thread, waited for at most ``BOUND_S``: the run, or nothing if it did not end."""
    runs: list[Any] = []
    runner = threading.Thread(target=lambda: runs.append(fleet.run(parse_spec(data))), daemon=True)
    runner.start()
    runner.join(BOUND_S)
    return runs


def test_idle_workers_on_this_loop_stop_at_once_without_asking_the_queue_again(
    tmp_path: Path, hour_long_backoff: None
) -> None:
    store = LocalStore.open(tmp_path / "state")
    counted = CountedReceives()
    batches = counted.batches(store)

    async def scenario() -> None:
        containers = [Container(True) for _ in range(4)]
        workers = [asyncio.create_task(batches.work(c, lambda: False)) for c in containers]
        for _ in range(int(BOUND_S / 0.01)):
            if counted.count == 4:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # each past its receive, into its hour of backoff
        batches.stop()
        done, pending = await asyncio.wait(workers, timeout=BOUND_S)
        for container in containers:
            await container.aclose()
        assert not pending, "an idle worker slept through the stop"
        for task in done:
            task.result()

    try:
        asyncio.run(scenario())
    finally:
        store.close()
    assert counted.count == 4  # one receive each, none after the stop


@pytest.mark.parametrize("wake", [True, False], ids=["woken-by-the-pipe", "looking-every-20-ms"])
def test_idle_worker_processes_exit_on_the_stop_without_another_poll(
    tmp_path: Path, hour_long_backoff: None, monkeypatch: pytest.MonkeyPatch, wake: bool
) -> None:
    """A worker process whose loop cannot watch the pipe looks at the stop every ``STOP_LOOK_S`` instead."""
    if not wake:
        monkeypatch.setattr(processes, "_watch", lambda *_: False)
        monkeypatch.setattr(processes, "STOP_LOOK_S", 0.02)
    state = tmp_path / "state"
    LocalStore.open(state).close()
    counted = CountedReceives()
    plan = WorkerPlan(tmp_path / "workers.jsonl", lambda: LocalStore.open(state), counted.batches, True)
    pool = WorkerProcesses(plan, [2, 2])
    children = multiprocessing.active_children()
    try:
        _wait_for(lambda: counted.count == 4)
    finally:
        pool.stop()
    assert sorted(c.exitcode or 0 for c in children) == [0, 0]  # none killed after STOP_WAIT_S
    assert counted.count == 4  # one receive each, none after the stop


@pytest.mark.parametrize("spread", [1, 2], ids=["one-process", "two-processes"])
def test_a_run_ends_with_its_idle_workers_stopped_by_the_run_not_their_backoff(
    tmp_path: Path, books_spec: SpecData, hour_long_backoff: None, monkeypatch: pytest.MonkeyPatch, spread: int
) -> None:
    """A whole ``sluice run`` of one host: the workers without its batch idle through it, backing off an hour
    (woken meanwhile only by a batch of their process ending)."""
    exit_codes: list[int | None] = []
    stop = WorkerProcesses.stop

    def stopped(pool: WorkerProcesses) -> None:
        children = multiprocessing.active_children()
        stop(pool)
        exit_codes.extend(c.exitcode for c in children)

    monkeypatch.setattr(WorkerProcesses, "stop", stopped)
    with running_demo_site(books=100) as site:
        data = books_spec("ends", site.base_url, pages=5, max_depth=0)
        crawls = _spec_folder(tmp_path, data)
        fleet = LocalFleet(crawls, tmp_path / "state", workers=4, processes=spread, allow_loopback=True)
        runs = _run_within_bound(fleet, data)
    assert runs, "the run did not end: an idle worker slept through its stop"
    assert runs[0].summary.pages.fetched == 5
    assert exit_codes == ([0, 0] if spread == 2 else [])


@pytest.mark.parametrize("spread", [1, 2])
def test_a_run_is_finalized_when_its_last_batch_ends_not_when_the_drain_next_looks(
    tmp_path: Path, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch, spread: int
) -> None:
    """The drain looks whether the run is quiet every ``WATCH_EVERY_S``; the end of a batch wakes it at once, of its
    own process or (``spread`` 2) of a worker process, which tells the parent through a pipe. With the look an hour
    apart, only that wake can finalize the run (it used to sleep 50 ms a look; worker processes' batches, always)."""
    from sluice_tools.runner import local

    monkeypatch.setattr(local, "WATCH_EVERY_S", HOUR)
    with running_demo_site(books=100) as site:
        data = books_spec("ends", site.base_url, pages=5, max_depth=1)
        crawls = _spec_folder(tmp_path, data)
        fleet = LocalFleet(crawls, tmp_path / "state", workers=2, processes=spread, allow_loopback=True)
        runs = _run_within_bound(fleet, data)
    assert runs, "the run was not finalized: the drain slept through the end of its last batch"
    assert runs[0].summary.status == "finished"
    assert runs[0].summary.pages.fetched >= 5  # the seeds, then what their links found (a batch of its own)


def test_a_runs_work_folder_is_gone_and_its_parquet_written_when_the_command_returns(
    tmp_path: Path, books_spec: SpecData
) -> None:
    """The work folder (parts, seed set, finalize scratch) is removed while the Parquet copy is written: both are
    done when ``run`` returns, and the copy holds every record the JSON Lines output does."""
    from sluice.domain.layout import work_prefix

    with running_demo_site(books=100) as site:
        data = books_spec("ends", site.base_url, pages=5, max_depth=0)
        crawls = _spec_folder(tmp_path, data)
        run = LocalFleet(crawls, tmp_path / "state", workers=2, allow_loopback=True).run(parse_spec(data))
    objects = tmp_path / "state" / "objects"
    assert not (objects / work_prefix("ends", run.run_id)).exists()
    assert (objects / "work").exists()  # the folder that held it stays: only the run's own is removed
    records = sum(len(p.read_text().splitlines()) for p in Path(run.outputs["records"]).glob("*.jsonl"))
    assert records == run.summary.records_total > 0
    assert "parquet" in run.outputs
    assert (Path(run.outputs["parquet"]) / "records.parquet").stat().st_size > 0

"""`sluice run --processes N`: the workers spread over worker processes, each with its own loop and connection.

What must not change with them: every page counted once and every record written once, each host's cap
held at the site, the run's log whole line by line, and a crash leaving a run the next command resumes.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.config import DEFAULT

from sluice.spec import parse_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.processes import WorkerDied, split
from sluice_tools.runner.session import LocalRun, RunView

from .conftest import SpecData
from .test_resume import LISTINGS as RESUMABLE_LISTINGS
from .test_resume import command, done_urls, finish, output_keys, spec_file

CRAWL = "spread"
LISTINGS = 60
BOOKS = LISTINGS * 20
SMALL_BATCHES = replace(DEFAULT, batch_size=2, urls_per_message=2)
"""Many small batches, so the processes take turns at the host and at the state file."""


def _spec_folder(tmp_path: Path, books_spec: SpecData, base_url: str, cap: int) -> tuple[Path, Any]:
    data = books_spec(CRAWL, base_url, pages=LISTINGS, max_depth=0)
    data["politeness"] |= {"concurrency": 8, "concurrency_per_domain": cap}
    crawls = tmp_path / "crawls"
    crawls.mkdir(exist_ok=True)
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return crawls, parse_spec(data)


def _keys(run: LocalRun) -> list[str]:
    folder = Path(run.outputs["records"])
    return [json.loads(line)["_key"] for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_workers_split_evenly_over_at_most_as_many_processes_as_workers() -> None:
    assert split(8, 2) == [4, 4]
    assert split(5, 2) == [3, 2]
    assert split(2, 4) == [1, 1]
    assert split(1, 1) == [1]


def test_a_run_on_worker_processes_counts_each_page_once_keeps_the_cap_and_writes_whole_log_lines(
    tmp_path: Path, books_spec: SpecData
) -> None:
    with running_demo_site(books=BOOKS, latency_ms=10) as site:
        crawls, spec = _spec_folder(tmp_path, books_spec, site.base_url, cap=2)
        fleet = LocalFleet(
            crawls,
            tmp_path / "state",
            workers=4,
            processes=2,
            batch_messages=SMALL_BATCHES.batch_size,
            allow_loopback=True,
            config=SMALL_BATCHES,
        )
        run = fleet.run(spec)
        stats = site.stats.snapshot(with_log=False)
        pages = [f"/catalogue/page-{n}.html" for n in range(1, LISTINGS + 1)]
        counts = {page: site.stats.count(page) for page in pages}
    assert run.summary.pages.fetched == LISTINGS
    assert counts == dict.fromkeys(pages, 1)
    keys = _keys(run)
    assert len(keys) == len(set(keys)) == BOOKS
    assert stats["max_in_flight"] <= 2
    lines = Path(run.outputs["logs"]).read_text(encoding="utf-8").splitlines()
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(logged) == sum(1 for line in lines if line.strip())  # no line cut by another process's
    assert {e.get("message") for e in logged} >= {"worker processes", "batch done"}
    assert not multiprocessing.active_children()  # every worker process ended with the run


def test_worker_processes_split_a_broad_crawls_hosts_evenly_and_keep_each_hosts_cap(
    tmp_path: Path, books_spec: SpecData
) -> None:
    # 8 hosts of 3 messages each, 2 workers in each of 2 processes: a receive of up to 100 messages took all 8
    # into one batch of one process while the other process's workers found nothing.
    with ExitStack() as stack:
        sites = [
            stack.enter_context(running_demo_site(books=120, latency_ms=10, host=f"127.0.0.{n + 2}")) for n in range(8)
        ]
        urls = [f"{s.base_url}/catalogue/page-{n}.html" for s in sites for n in range(1, 7)]
        data = books_spec(CRAWL, sites[0].base_url, pages=0, urls=urls, max_depth=0)
        data["politeness"] |= {"concurrency": 8, "concurrency_per_domain": 2}
        crawls = tmp_path / "crawls"
        crawls.mkdir()
        (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        config = replace(DEFAULT, urls_per_message=2)
        fleet = LocalFleet(crawls, tmp_path / "state", workers=4, processes=2, allow_loopback=True, config=config)
        run = fleet.run(parse_spec(data))
        caps = [s.stats.snapshot(with_log=False)["max_in_flight"] for s in sites]
        counts = [s.stats.count(f"/catalogue/page-{n}.html") for s in sites for n in range(1, 7)]
    assert run.summary.pages.fetched == len(urls)
    assert counts == [1] * len(urls)
    assert max(caps) <= 2
    lines = Path(run.outputs["logs"]).read_text(encoding="utf-8").splitlines()
    batches = [json.loads(line) for line in lines if line.startswith("{") and '"batch done"' in line]
    assert sum(b["urls"] for b in batches) == len(urls)
    assert max(b["host_count"] for b in batches) <= 4  # a process holds its half of the hosts, never all 8


def test_a_worker_process_that_dies_stops_the_run_and_the_next_command_finishes_it_exactly_once(
    tmp_path: Path, books_spec: SpecData
) -> None:
    killed: list[int] = []

    def kill_a_worker(view: RunView) -> None:
        if view.done >= 5 and not killed:
            child = multiprocessing.active_children()[0]
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            killed.append(child.pid)

    with running_demo_site(books=BOOKS, latency_ms=20) as site:
        crawls, spec = _spec_folder(tmp_path, books_spec, site.base_url, cap=2)
        fleet = LocalFleet(crawls, tmp_path / "state", workers=2, processes=2, allow_loopback=True)
        with pytest.raises(WorkerDied, match="run the same command again to resume"):
            fleet.run(spec, progress=kill_a_worker)
        assert killed
        assert not multiprocessing.active_children()

        again = LocalFleet(crawls, tmp_path / "state", workers=2, processes=2, allow_loopback=True)
        run = again.run(spec)

    assert run.resumed is not None
    assert run.resumed.startswith(f"resuming run {run.run_id}")
    assert run.summary.pages.fetched + run.summary.pages.not_modified == LISTINGS
    keys = _keys(run)
    assert len(keys) == len(set(keys)) == BOOKS


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_of_sluice_run_takes_its_worker_processes_with_it_and_the_next_command_resumes(
    tmp_path: Path, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(str(root / p) for p in ("functions", "tools")))  # this code
    with running_demo_site(books=RESUMABLE_LISTINGS * 20, latency_ms=20) as site:
        spec, state = spec_file(tmp_path, site.base_url, books_spec), tmp_path / "state"
        killed = command(spec, state, "--workers", "2", "--processes", "2")
        with subprocess.Popen(killed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:  # noqa: S603
            deadline = time.monotonic() + 60
            while len(done_urls(state)) < 10:
                assert proc.poll() is None, "sluice run ended before the kill point"
                assert time.monotonic() < deadline, "the kill point was never reached"
                time.sleep(0.01)
            workers = _children(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        assert len(workers) == 2
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, "a worker process outlived its killed parent"
            time.sleep(0.01)
        done_before = done_urls(state)

        out, said = finish(spec, state, "--workers", "2", "--processes", "2")

    assert "resuming run" in said
    assert out["pages"]["fetched"] == RESUMABLE_LISTINGS
    keys = output_keys(out)
    assert len(keys) == len(set(keys)) == RESUMABLE_LISTINGS * 20
    for url in done_before:
        assert site.stats.count(url.removeprefix(site.base_url)) == 1, f"{url} fetched again after the resume"

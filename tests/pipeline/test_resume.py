"""Crash resume: ``kill -9`` a local ``sluice run`` anywhere; running it again finishes the same run, exactly once.

The killed command is a real subprocess against the demo site over loopback; where it stands is
read from the state folder's SQLite file by another connection, as a user's second terminal would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.domain.layout import summary_key
from sluice.domain.runs import Progress
from sluice.pipeline.finalize import combine as finalize_module
from sluice.pipeline.finalize import output
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import FlagsDiffer

from .conftest import Pipeline, SpecData, local_harness
from .test_page_types import typed_spec

CRAWL = "resumable"
LISTINGS = 400
BOOKS = LISTINGS * 20
KILL_WAIT_S = 60.0


def spec_file(folder: Path, base_url: str, books_spec: SpecData) -> Path:
    data = books_spec(CRAWL, base_url, pages=LISTINGS)
    data["politeness"]["concurrency"] = data["politeness"]["concurrency_per_domain"] = 4
    parse_spec(data)
    path = folder / "crawls" / f"{CRAWL}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def command(spec: Path, state: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sluice_tools.cli",
        "run",
        str(spec),
        "--state",
        str(state),
        "--allow-loopback",
        *extra,
    ]


def done_urls(state: Path) -> set[str]:
    """URLs the run has counted, as another process sees the state file."""
    if not (state / "sluice.db").exists():
        return set()
    with sqlite3.connect(f"file:{state / 'sluice.db'}?mode=ro", uri=True, timeout=5) as db:
        try:
            return {url for (url,) in db.execute("SELECT url FROM urls WHERE done = 1")}
        except sqlite3.OperationalError:  # the schema is not there yet
            return set()


def kill_when(spec: Path, state: Path, ready: Callable[[Path], bool]) -> set[str]:
    """Start ``sluice run``, SIGKILL it once ``ready(state)``; return the URLs it had counted by then.

    One worker, whose batch writes its first half while it fetches its second (its 400 URLs are one local
    batch): a kill point between the two writes exists.
    """
    killed = command(spec, state, "--workers", "1")
    with subprocess.Popen(killed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:  # noqa: S603
        deadline = time.monotonic() + KILL_WAIT_S
        try:
            while not ready(state):
                assert proc.poll() is None, "sluice run ended before the kill point"
                assert time.monotonic() < deadline, "the kill point was never reached"
                time.sleep(0.01)  # another process's state file: its time is its own, no test clock moves it
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
    return done_urls(state)


def finish(spec: Path, state: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """Run the same command again to its end; its JSON summary and what it printed on stderr."""
    answer = subprocess.run(  # noqa: S603
        command(spec, state, "--json", *extra), capture_output=True, text=True, timeout=120, check=False
    )
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout), answer.stderr


def output_keys(out: dict[str, Any]) -> list[str]:
    folder = Path(out["outputs"]["records"])
    return [
        json.loads(line)["_key"] for file in sorted(folder.glob("*.jsonl")) for line in file.read_text().splitlines()
    ]


@pytest.fixture
def slow_site() -> Any:
    with running_demo_site(books=BOOKS, latency_ms=20) as site:
        yield site


@pytest.mark.parametrize(
    "kill_point",
    [
        pytest.param(lambda state: len(done_urls(state)) >= 1, id="first-page-counted"),
        pytest.param(lambda state: len(done_urls(state)) >= LISTINGS // 2, id="half-way"),
    ],
)
def test_killed_run_resumes_fetching_no_page_already_done_and_ends_with_every_record_once(
    tmp_path: Path, slow_site: RunningDemoSite, books_spec: SpecData, kill_point: Callable[[Path], bool]
) -> None:
    spec, state = spec_file(tmp_path, slow_site.base_url, books_spec), tmp_path / "state"
    done_before = kill_when(spec, state, kill_point)
    assert 0 < len(done_before) < LISTINGS

    out, said = finish(spec, state)

    assert "resuming run" in said
    assert f"of {LISTINGS} pages done" in said
    assert f"resuming run {out['run_id']}: " in said
    assert out["status"] == "finished"
    pages = {k: out["pages"][k] for k in ("fetched", "not_modified", "failed", "skipped")}
    assert pages == {"fetched": LISTINGS, "not_modified": 0, "failed": 0, "skipped": 0}
    assert out["records"]["total"] == BOOKS
    keys = output_keys(out)
    assert len(keys) == len(set(keys)) == BOOKS
    # No page counted before the kill was fetched again.
    for url in done_before:
        path = url.removeprefix(slow_site.base_url)
        assert slow_site.stats.count(path) == 1, f"{path} fetched again after the resume"
    # The run's log holds what the killed command wrote before its kill, then the resume: one log for the run.
    logs = state / "logs" / f"{CRAWL}-{out['run_id']}.jsonl"
    messages = [json.loads(line).get("message") for line in logs.read_text(encoding="utf-8").splitlines()]
    assert "run resumed" in messages
    assert "run opened" in messages[: messages.index("run resumed")]
    assert sorted(p.name for p in logs.parent.glob("*.jsonl")) == [logs.name]


def test_restart_abandons_the_interrupted_run_and_starts_anew(
    tmp_path: Path, slow_site: RunningDemoSite, books_spec: SpecData
) -> None:
    spec, state = spec_file(tmp_path, slow_site.base_url, books_spec), tmp_path / "state"
    kill_when(spec, state, lambda s: len(done_urls(s)) >= 10)

    out, said = finish(spec, state, "--restart")

    assert "abandoned run" in said
    assert "finalized as unfinished" in said
    assert "resuming run" not in said
    assert (out["status"], out["records"]["total"]) == ("finished", BOOKS)
    abandoned = said.split("abandoned run ")[1].split(":")[0]
    assert abandoned != out["run_id"]
    summary = json.loads((state / "objects" / summary_key(CRAWL, abandoned)).read_text())
    assert summary["status"] == "unfinished"
    assert summary["pages"]["pending"] > 0


def test_run_whose_finalizer_died_is_finalized_again_by_the_next_command(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = books_spec(CRAWL, site.base_url)
    spec = parse_spec(data)
    specs = tmp_path / "crawls"
    specs.mkdir()
    (specs / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    fleet = LocalFleet(specs, tmp_path / "state", workers=2, allow_loopback=True)
    real = output.write_index_and_manifest

    def dies(*args: Any) -> Any:
        raise RuntimeError("the finalizer died writing the output")

    monkeypatch.setattr(finalize_module, "write_index_and_manifest", dies)
    with pytest.raises(RuntimeError, match="finalizer died"):
        fleet.run(spec)
    monkeypatch.setattr(finalize_module, "write_index_and_manifest", real)

    run = fleet.run(spec)

    assert run.resumed is not None
    assert run.resumed.startswith(f"finishing run {run.run_id}: all 5 pages done")
    assert (run.summary.status, run.summary.records_total) == ("finished", 100)
    assert site.stats.count("/catalogue/page-1.html") == 1  # nothing fetched again: only finalizing was left
    assert run.summary.outputs is not None
    assert len(run.summary.outputs.files) == 1


def test_the_resume_line_counts_the_pages_done_against_every_url_the_run_holds(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """After two kill -9s main said "resuming run ID: 1700 of 100 pages done": the progress hints (off after a
    killed batch) against the seeds alone. The line is the run's exact count: its links included."""
    with local_harness(tmp_path) as harness:
        pipeline = Pipeline(harness)
        spec = pipeline.spec(typed_spec(books_spec, site.base_url))
        run_id = pipeline.start(spec.name)
        for _ in range(3):
            pipeline.deliver(pipeline.receive(1))
        harness.store.frontier.add_progress(run_id, Progress(done=1700))  # hints a killed process left off
        fleet = LocalFleet(tmp_path / "crawls", tmp_path / "state")
        resumed = fleet._interrupted(spec, harness.store, harness.services, False)
        tally = pipeline.tally(spec.name, run_id)
    assert resumed is not None
    assert tally.links > 0
    assert 0 < tally.done < tally.enqueued
    assert resumed.describe() == f"resuming run {run_id}: {tally.done} of {tally.enqueued} pages done"


def test_a_resume_with_other_fetch_flags_is_refused_before_anything_is_fetched(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started with --allow-loopback and resumed without it (the hint `sluice show` printed) skipped every page
    left ("address 127.0.0.1 is loopback") and finished with record_count_drop: the run keeps its fetch flags."""
    data = books_spec(CRAWL, site.base_url)
    spec = parse_spec(data)
    specs = tmp_path / "crawls"
    specs.mkdir()
    (specs / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    state = tmp_path / "state"
    real = output.write_index_and_manifest

    def dies(*args: Any) -> Any:
        raise RuntimeError("killed")

    monkeypatch.setattr(finalize_module, "write_index_and_manifest", dies)
    with pytest.raises(RuntimeError, match="killed"):
        LocalFleet(specs, state, workers=2, allow_loopback=True).run(spec)
    monkeypatch.setattr(finalize_module, "write_index_and_manifest", real)
    logs_before = sorted(p.name for p in (state / "logs").iterdir())

    with pytest.raises(FlagsDiffer, match="was started with --allow-loopback; add --allow-loopback to resume it"):
        LocalFleet(specs, state, workers=2, allow_loopback=False).run(spec)
    assert sorted(p.name for p in (state / "logs").iterdir()) == logs_before  # the refused command left no log

    run = LocalFleet(specs, state, workers=2, allow_loopback=True).run(spec)
    assert run.resumed is not None
    assert (run.summary.status, run.summary.records_total, run.summary.pages.skipped) == ("finished", 100, 0)
    assert site.stats.count("/catalogue/page-1.html") == 1

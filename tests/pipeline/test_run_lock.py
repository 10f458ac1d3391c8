"""One run per crawl at a time: a second start is refused naming the run in flight; after it, a new run opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.domain.runs import RunInFlight
from sluice.domain.seedset import SeedSet
from sluice.handlers import scheduler
from sluice.messages import StartEvent
from sluice.pipeline.start.fanout import SeedPlan, StartFailed, start_run
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import StateInUse, exclusive

from .conftest import AwsHarness, Pipeline, PipelineOn, SpecData, context

CRAWL = "books"


def run_ids(pipeline: Pipeline, crawl: str) -> list[str]:
    """Every run of ``crawl`` the ledger holds, in flight or not."""
    ledger = pipeline.services.ledger
    found = []
    lock = ledger.active_run(crawl)
    if lock is not None:
        found.append(lock.run_id)
    before = None
    for _ in range(100):
        run = ledger.latest_finished(crawl, before)
        if run is None:
            break
        found.append(run.run_id)
        before = run.run_id
    return sorted(found)


def test_second_run_while_one_is_in_flight_is_refused_naming_it(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    first = pipeline.start(CRAWL)
    queued = pipeline.in_queue()

    with pytest.raises(RunInFlight) as refused:
        start_run(StartEvent(crawl=CRAWL), pipeline.services, time_left=lambda: 900.0)
    assert first in str(refused.value)
    assert repr(CRAWL) in str(refused.value)
    # Refused means untouched: no second run, nothing enqueued, the lock still names the first run.
    assert run_ids(pipeline, CRAWL) == [first]
    assert pipeline.in_queue() == queued
    assert pipeline.run_state(CRAWL, first).seeds == 5
    assert pipeline.active_run_id(CRAWL) == first

    # Another crawl is not held up by this one's lock.
    pipeline.spec(books_spec("other", site.base_url, pages=1))
    other = pipeline.start("other")
    assert pipeline.active_run_id("other") == other

    pipeline.drain()
    assert {f["run_id"] for f in pipeline.finalize()} == {first, other}
    assert pipeline.services.ledger.active_run(CRAWL) is None

    second = pipeline.start(CRAWL)
    assert second > first
    assert sorted(run_ids(pipeline, CRAWL)) == [first, second]
    assert pipeline.active_run_id(CRAWL) == second


def test_a_second_local_run_on_the_same_state_folder_is_refused(tmp_path: Path) -> None:
    spec = parse_spec(
        {"name": "books", "seeds": ["http://127.0.0.1:9/x.html"], "extract": {"fields": {"title": "h1::text"}}}
    )
    state = tmp_path / "state"
    state.mkdir()
    with exclusive(state), pytest.raises(StateInUse, match="another sluice run is using"):
        LocalFleet(tmp_path, state).run(spec)


def test_a_start_that_fails_after_opening_its_run_closes_it_and_releases_the_lock(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Input the fan-out cannot use, met after the run is open: the run is closed with the reason, the
    lock released, and the next start opens a run as usual (no lock left until the deadline)."""
    pipeline.spec(books_spec(CRAWL, site.base_url))

    def unusable(self: SeedPlan) -> SeedSet:
        raise ValueError("seed 3 cannot be carried")

    monkeypatch.setattr(SeedPlan, "seed_set", unusable)
    with pytest.raises(StartFailed, match="seed 3 cannot be carried"):
        start_run(StartEvent(crawl=CRAWL, trigger="nightly-1"), pipeline.services, time_left=lambda: 900.0)
    assert pipeline.services.ledger.active_run(CRAWL) is None
    [failed] = run_ids(pipeline, CRAWL)
    summary = pipeline.summary(CRAWL, failed)
    assert summary["stopped"] == "start failed: seed 3 cannot be carried"
    assert summary["status"] == "unfinished"
    assert summary["verdict"]["healthy"] is False
    assert pipeline.in_queue() == 0

    monkeypatch.undo()
    second = pipeline.run(CRAWL)
    assert run_ids(pipeline, CRAWL) == sorted([failed, second])
    assert pipeline.summary(CRAWL, second)["verdict"]["healthy"] is True


def test_the_scheduler_answers_a_failed_start_instead_of_raising(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raised, Lambda would retry the start twice, and each retry would open and fail another run."""
    aws_pipeline.spec(books_spec(CRAWL, site.base_url))

    def unusable(self: SeedPlan) -> SeedSet:
        raise ValueError("bad seed")

    monkeypatch.setattr(SeedPlan, "seed_set", unusable)
    answer = scheduler.handler({"crawl": CRAWL, "trigger": "nightly-1"}, context("scheduler"))
    assert "start failed: bad seed" in answer["failed"]
    assert aws_pipeline.services.ledger.active_run(CRAWL) is None

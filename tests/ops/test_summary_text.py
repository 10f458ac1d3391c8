"""What `sluice run` and `sluice show` print of summaries they did not write: a failed run's, an old one's."""

from __future__ import annotations

from tests.domain.test_summary import BEFORE_THE_RENAME

from sluice.domain.runs import RunState
from sluice.domain.summary import RunSummary
from sluice_tools.ops.runs import RunRow
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text

FILES = {"records": "records/", "summary": "summary.json"}


def test_a_failed_runs_summary_says_why_with_no_counts_to_show() -> None:
    failed = RunSummary.from_json(
        {
            "crawl": "shop",
            "run_id": "r",
            "status": "failed",
            "failed": "finalize shard 1 of 2 (scan) failed 3 times: OSError: disk full",
            "started_at": "2026-11-01T00:00:00+00:00",
            "pages": {"seeds": 3},
            "verdict": {"healthy": False, "alerts": [{"check": "finalize", "message": "disk full"}]},
        }
    )
    text = as_text(LocalRun("shop", "r", failed, [], FILES)).splitlines()
    assert text[0] == "run r of shop: failed, UNHEALTHY"
    assert "  records  0 (new 0, changed 0, unchanged 0)" in text
    assert "  ALERT finalize: disk full" in text


def test_a_summary_an_older_version_wrote_is_listed_and_shown() -> None:
    old = RunSummary.from_json(BEFORE_THE_RENAME)
    run = RunState("shop", old.run_id, "finished", old.started_at, old.started_at, "d")
    row = RunRow.of(run, old)
    assert (row.status, row.pages, row.failed, row.records, row.cost_usd) == ("finished", 3, 0, 40, None)
    text = as_text(LocalRun("shop", old.run_id, old, [], FILES))
    assert "  records  40 (new 0, changed 1, unchanged 39)" in text.splitlines()
    assert "cost" not in text  # an old summary without a cost section says nothing of it


def test_a_resumed_runs_summary_leaves_the_resume_to_stderr() -> None:
    """`sluice run` says "resuming run ..." on stderr as it resumes (the fleet's ``say``): its stdout result, the
    summary, said it again, so a terminal showed it twice and a script reading stdout got a line not of the run's."""
    old = RunSummary.from_json(BEFORE_THE_RENAME)
    resumed = LocalRun("shop", old.run_id, old, [], FILES, resumed=f"resuming run {old.run_id}: 2 of 3 pages done")
    text = as_text(resumed)
    assert "resuming" not in text
    assert text.splitlines()[0].startswith(f"run {old.run_id} of shop: ")


def test_a_repaired_runs_summary_says_its_verdict_when_it_ran() -> None:
    """After `sluice reextract` the verdict is the repaired one: show said HEALTHY alone of a night that was not."""
    old = RunSummary.from_json(BEFORE_THE_RENAME)
    then = {"healthy": False, "alerts": [{"check": "null_rate", "message": "price missing in 100% of items"}]}
    repaired = RunSummary.from_json(
        old.to_json()
        | {
            "verdict": {"healthy": True, "alerts": []},
            "reextracted": {"at": "2026-11-02T00:00:00+00:00", "spec_digest": "new", "before": {"verdict": then}},
        }
    )
    text = as_text(LocalRun("shop", old.run_id, repaired, [], FILES)).splitlines()
    assert text[0] == f"run {old.run_id} of shop: finished, HEALTHY since its repair, UNHEALTHY when it ran (null_rate)"
    assert "  as run   UNHEALTHY (the verdict and records of the night it ran, before the repair)" in text
    assert "           then ALERT null_rate: price missing in 100% of items" in text
    plain = as_text(LocalRun("shop", old.run_id, old, [], FILES)).splitlines()
    assert plain[0] == f"run {old.run_id} of shop: finished, HEALTHY"

"""A run's summary read back: what this version writes comes back equal, and older summaries still read."""

from __future__ import annotations

from typing import Any

from sluice.domain.summary import NotDueBy, RunSummary

BEFORE_THE_RENAME: dict[str, Any] = {
    "crawl": "shop",
    "run_id": "20261101T000000Z-000000",
    "status": "finished",
    "started_at": "2026-11-01T00:00:00+00:00",
    "finalized_at": "2026-11-01T00:05:00+00:00",
    "spec_digest": "d",
    "catalog_run": "20261031T000000Z-000000",
    "pages": {"seeds": 3, "fetched": 1, "not_modified": 2, "failed": 0, "skipped": 0},
    "records": {"total": 40, "new": 0, "changed": 1, "unchanged": 39, "carried_missing": 7},
    "verdict": {"healthy": True, "record_count_ratio": 1.0, "error_rate": 0.0, "alerts": []},
    "failures": {},
    "null_rates": {},
    "previous_run": {"run_id": "20261031T000000Z-000000", "records": 40},
}
"""A summary as an older version wrote it: ``carried_missing``, no limits, no checks, no cost, no route."""


def test_an_older_summary_reads_carried_missing_as_reused_missing() -> None:
    summary = RunSummary.from_json(BEFORE_THE_RENAME)
    assert summary.records is not None
    assert summary.records.reused_missing == 7
    written = summary.to_json()
    assert written["records"]["reused_missing"] == 7
    assert "carried_missing" not in written["records"]


def test_an_older_summary_without_later_sections_reads_them_empty() -> None:
    summary = RunSummary.from_json(BEFORE_THE_RENAME)
    assert (summary.limits, summary.cost, summary.egress, summary.verdict.checks) == (None, None, None, ())
    assert summary.pages.enqueued == 0  # a count it did not keep reads as none
    assert summary.previous_run is not None
    assert summary.previous_run.records == 40


def test_what_this_version_writes_reads_back_equal() -> None:
    """(`sluice run --json` against a real run's summary.json checks the same on every section a finalizer writes:
    tests/pipeline/test_local_run.py.)"""
    written = RunSummary.from_json(BEFORE_THE_RENAME).to_json()
    assert RunSummary.from_json(written).to_json() == written


def test_a_failed_run_keeps_its_short_shape() -> None:
    failed = {
        "crawl": "shop",
        "run_id": "r",
        "status": "failed",
        "failed": "finalize shard 1 of 2 (scan) failed 3 times: OSError: disk",
        "started_at": "2026-11-01T00:00:00+00:00",
        "finalized_at": "2026-11-01T00:30:00+00:00",
        "spec_digest": "d",
        "catalog_run": None,
        "pages": {"seeds": 3},
        "verdict": {
            "healthy": False,
            "record_count_ratio": None,
            "error_rate": None,
            "alerts": [{"check": "finalize", "message": "m", "value": None, "threshold": None}],
            "checks": [{"check": "finalize", "ok": False, "message": "m"}],
        },
    }
    assert RunSummary.from_json(failed).to_json() == failed


def test_not_due_by_says_what_said_not_due() -> None:
    stored = dict(BEFORE_THE_RENAME, pages={"not_due": 5, "not_due_by": {"sitemap": 2, "schedule": 3}})
    assert RunSummary.from_json(stored).pages.not_due_by == NotDueBy(sitemap=2, schedule=3)

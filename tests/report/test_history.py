"""The report's reading of run summaries: order, floor, null rates, and the alerts a re-extracted run raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from sluice.domain.runs import RunState
from sluice.domain.summary import RunSummary
from sluice.spec import parse_spec
from sluice_tools.ops.history import RunHistory
from sluice_tools.report.history import crawl_history, run_point

SPEC = parse_spec(
    {
        "name": "shop",
        "seeds": ["https://shop.example/"],
        "extract": {"fields": {"title": "h1", "price": "p.price"}},
        "alerts": {"record_count_floor": 0.5, "max_error_rate": 0.2},
    }
)


def _summary(run_id: str, started: str, finished: str, records: int, **extra: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "crawl": "shop",
        "run_id": run_id,
        "started_at": started,
        "finalized_at": finished,
        "records": {"total": records, "by_type": {}},
        "pages": {"fetched": 4, "not_modified": 1, "not_due": 0, "failed": 1, "skipped": 0},
        "verdict": {"healthy": True, "error_rate": 0.1667, "alerts": [], "checks": []},
        "null_rates": {"price": 0.25},
        "cost": {"estimated_usd": 0.0002},
        "previous_run": None,
    }
    return summary | extra


class _History:
    where = "test"

    def __init__(self, summaries: list[dict[str, Any]]) -> None:
        self.summaries = {s["run_id"]: s for s in summaries}

    def crawls(self) -> list[str]:
        return ["shop"]

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        # As the ledger lists them: by run id, newest first.
        ids = sorted(self.summaries, reverse=True)[:limit]
        started = {i: self.summaries[i]["started_at"] for i in ids}
        return [RunState(crawl, i, "finished", started[i], started[i], "digest") for i in ids]

    def summary(self, run: RunState) -> RunSummary | None:
        stored = self.summaries.get(run.run_id)
        return RunSummary.from_json(stored) if stored is not None else None


def _history(summaries: list[dict[str, Any]]) -> RunHistory:
    """The fake as the whole port: ``crawl_history`` reads only ``recent_runs`` and ``summary``."""
    return cast(RunHistory, _History(summaries))


def test_two_runs_started_in_one_second_are_told_apart_by_the_millisecond_their_ids_hold() -> None:
    # 0x3e7 = 999 ms, 0x001 = 1 ms: the later start finished first, and still comes second.
    early = _summary("20261201T000000Z-001fff", "2026-12-01T00:00:00+00:00", "2026-12-01T00:00:05+00:00", 10)
    late = _summary("20261201T000000Z-3e7000", "2026-12-01T00:00:00+00:00", "2026-12-01T00:00:02+00:00", 10)
    history = crawl_history(_history([late, early]), "shop", 10, SPEC)
    assert [r.run_id for r in history.runs] == [early["run_id"], late["run_id"]]


def test_two_runs_started_in_one_millisecond_are_told_apart_by_when_they_finished() -> None:
    first = _summary("20261201T000000Z-000fff", "2026-12-01T00:00:00+00:00", "2026-12-01T00:00:01+00:00", 10)
    second = _summary(
        "20261201T000000Z-000000",
        "2026-12-01T00:00:00+00:00",
        "2026-12-01T00:00:03+00:00",
        2,
        previous_run={"run_id": first["run_id"], "records": 10},
    )
    history = crawl_history(_history([first, second]), "shop", 10, SPEC)
    assert [r.run_id for r in history.runs] == [first["run_id"], second["run_id"]]
    assert [r.floor for r in history.runs] == [None, 5.0]
    assert history.max_error_rate == 0.2
    assert history.runs[1].duration_s == 3.0
    assert history.runs[0].null_rates == {"title": 0.0, "price": 0.25}


def test_a_re_extracted_run_keeps_the_alerts_it_raised_when_it_ran() -> None:
    before = {
        "verdict": {"healthy": False, "alerts": [{"check": "record_count_drop", "message": "0 records vs 10"}]},
        "records": {"total": 0},
    }
    summary = _summary("r", "2026-12-01T00:00:00+00:00", "", 10, reextracted={"before": before})
    summary["finalized_at"] = None
    point = run_point(RunSummary.from_json(summary), 10, 0.8, [])
    assert [(a.check, a.when) for a in point.alerts] == [("record_count_drop", "at run time")]
    assert point.records_at_run_time == 0
    assert point.floor == 8.0
    assert point.duration_s is None
    assert point.null_rates == {"price": 0.25}


def test_report_refuses_a_crawl_with_no_runs_by_name(tmp_path: Path) -> None:
    from sluice_tools.cli import main

    assert main(["report", "nope", "--state", str(tmp_path)]) == 2

"""The run verdict: the checks that catch a scraper's silent failures."""

from __future__ import annotations

from sluice.domain.verdict import RunCounts, judge
from sluice.spec import Alerts, Follow

ALERTS = Alerts(record_count_floor=0.5, max_error_rate=0.1)


def test_healthy_run_passes_every_check() -> None:
    verdict = judge(RunCounts(fetched=50, records=1000), previous_records=990, alerts=ALERTS)
    assert verdict.healthy
    assert verdict.alerts == []
    assert verdict.record_count_ratio is not None
    assert round(verdict.record_count_ratio, 3) == round(1000 / 990, 3)


def test_record_count_drop_below_floor_is_unhealthy() -> None:
    verdict = judge(RunCounts(fetched=50, records=40), previous_records=48_000, alerts=ALERTS)
    assert not verdict.healthy
    assert [a.name for a in verdict.alerts] == ["record_count_drop"]
    assert "40 records vs 48000" in verdict.alerts[0].message


def test_drop_exactly_at_floor_is_still_healthy() -> None:
    assert judge(RunCounts(fetched=1, records=50), previous_records=100, alerts=ALERTS).healthy


def test_error_rate_above_ceiling_is_unhealthy() -> None:
    verdict = judge(RunCounts(fetched=80, failed=20, records=900), previous_records=1000, alerts=ALERTS)
    assert [a.name for a in verdict.alerts] == ["error_rate"]
    assert verdict.error_rate == 0.2


def test_skipped_pages_are_not_errors() -> None:
    verdict = judge(RunCounts(fetched=10, skipped=90, records=200), previous_records=None, alerts=ALERTS)
    assert verdict.error_rate == 0.0
    assert verdict.healthy


def test_first_run_has_no_ratio_and_passes_the_drop_check() -> None:
    verdict = judge(RunCounts(fetched=5, records=100), previous_records=None, alerts=ALERTS)
    assert verdict.healthy
    assert verdict.record_count_ratio is None
    assert any(c.name == "record_count_drop" and "first run" in c.message for c in verdict.checks)


def test_zero_records_is_unhealthy_even_on_a_first_run() -> None:
    verdict = judge(RunCounts(fetched=50, records=0), previous_records=None, alerts=ALERTS)
    assert [a.name for a in verdict.alerts] == ["records_nonzero"]


def test_unfinished_run_is_unhealthy() -> None:
    verdict = judge(RunCounts(fetched=50, records=1000), previous_records=1000, alerts=ALERTS, finished=False)
    assert [a.name for a in verdict.alerts] == ["finished"]


def test_null_rate_ceiling_names_the_field() -> None:
    alerts = Alerts(max_null_rate=0.2)
    counts = RunCounts(fetched=1, records=10, items=10, missing={"price": 5, "title": 1})
    verdict = judge(counts, previous_records=None, alerts=alerts)
    assert [a.name for a in verdict.alerts] == ["null_rate:price"]


def test_a_run_cut_short_by_its_limits_says_so_and_is_unhealthy_only_if_the_spec_asks() -> None:
    counts = RunCounts(fetched=50, records=1000, capped_links=7, beyond_depth=3)
    follow = Follow(max_pages=50, max_depth=2)
    said = {c.name: c for c in judge(counts, None, ALERTS, follow=follow).checks}["truncated"]
    assert said.ok
    assert said.value == 10
    assert said.message.startswith(
        "max_pages (50) reached: 7 new link(s) left unvisited; max_depth (2) reached: up to 3 link(s) beyond it"
    )
    strict = Alerts(record_count_floor=0.5, max_error_rate=0.1, fail_when_truncated=True)
    verdict = judge(counts, None, strict, follow=follow)
    assert not verdict.healthy
    assert [a.name for a in verdict.alerts] == ["truncated"]
    assert judge(RunCounts(fetched=5, records=10), None, strict, follow=follow).healthy

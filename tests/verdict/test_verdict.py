"""The run verdict: the checks that catch a scraper's silent failures."""

from __future__ import annotations

from sluice.domain.verdict import RunCounts, TypeCounts, judge
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


def test_a_sitemap_crawl_cut_by_max_pages_is_truncated_and_fails_when_the_spec_asks() -> None:
    # 50 URLs in the sitemap, max_pages 10: 40 never seeded. No link was capped, none beyond depth.
    counts = RunCounts(fetched=10, records=200, sitemap_left_out=40)
    follow = Follow(max_pages=10)
    said = {c.name: c for c in judge(counts, None, ALERTS, follow=follow).checks}["truncated"]
    assert said.ok
    assert said.value == 40
    assert said.message.startswith("sitemaps: 40 page URL(s) left out past max_urls or max_pages (10)")
    strict = Alerts(fail_when_truncated=True)
    assert [a.name for a in judge(counts, None, strict, follow=follow).alerts] == ["truncated"]


def test_a_types_loss_hidden_in_the_total_is_caught_by_its_own_checks() -> None:
    counts = RunCounts(
        fetched=100,
        records=1000,
        items=1000,
        by_type={"listing": TypeCounts(records=1000, items=1000), "book": TypeCounts(records=0, items=0)},
    )
    verdict = judge(counts, previous_records=2000, alerts=ALERTS, previous_by_type={"listing": 1000, "book": 1000})
    # The total kept half of the last run's records: the run-wide check passes at the floor.
    assert next(c for c in verdict.checks if c.name == "record_count_drop").ok
    assert sorted(a.name for a in verdict.alerts) == ["record_count_drop:book", "records_nonzero:book"]
    assert "type 'book' collected 0 records" in next(a.message for a in verdict.alerts if a.name.startswith("records_"))
    assert not verdict.healthy


def test_a_types_null_rate_is_its_own_items_not_every_types() -> None:
    alerts = Alerts(record_count_floor=0.5, max_error_rate=0.1, max_null_rate=0.5)
    # 'isbn' is missing from 90 of the 100 book items; across all 1,100 items that would look like 8%.
    by_type = {"listing": TypeCounts(records=1000, items=1000), "book": TypeCounts(100, 100, {"isbn": 90})}
    counts = RunCounts(fetched=60, records=1100, items=1100, missing={"isbn": 90}, by_type=by_type)
    verdict = judge(counts, previous_records=None, alerts=alerts, previous_by_type={})
    assert [a.name for a in verdict.alerts] == ["null_rate:book.isbn"]
    assert verdict.alerts[0].value == 0.9


def test_stale_and_dropped_carried_data_is_said_and_fails_the_run_only_when_the_spec_asks() -> None:
    counts = RunCounts(
        fetched=10,
        records=100,
        carry_stale=7,
        carry_dropped={"note": 3},
        by_type={"listing": TypeCounts(records=50), "item": TypeCounts(records=50, carry_stale=7)},
    )
    said = {c.name: c for c in judge(counts, None, ALERTS).checks}
    assert (said["carry_stale"].ok, said["carry_dropped"].ok) == (True, True)
    assert "7 page(s) kept the last run's carried data" in said["carry_stale"].message
    assert "(by type: item 7)" in said["carry_stale"].message
    assert "alerts.fail_when_carry_lost makes this unhealthy" in said["carry_dropped"].message
    strict = Alerts(record_count_floor=0.5, max_error_rate=0.1, fail_when_carry_lost=True)
    assert [a.name for a in judge(counts, None, strict).alerts] == ["carry_stale", "carry_dropped"]
    clean = RunCounts(fetched=10, records=100, by_type={"item": TypeCounts(records=100)})
    assert judge(clean, None, strict).healthy

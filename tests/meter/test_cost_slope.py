"""`make cost`'s per million pages: the slope between two sizes of the same scenario, and a run's fixed cost the
intercept. Scaling one run counted its fixed part (the finalizer's S3 writes, the plan, the index) a million
pages' worth of times: 18 PUTs of a 2,000-page run became 9,000 a million pages."""

from __future__ import annotations

from typing import Any

import pytest
from bench import cost_report, parquet_copy_cost
from bench.parquet_copy_cost import MB, TB

from sluice.domain.cost import US_EAST_1
from sluice_tools.meter.fit import NegativeSlopeWarning

LABEL = "demo crawl, nightly (2% of pages changed)"
PAGE_PUT_USD = 0.000_000_5
"""Half a PUT-class request's worth a page ($0.005 a thousand): $0.50 a million pages."""
RUN_PUT_USD = 18 * 0.000_005
"""18 PUTs a run whatever its size: $0.00009."""
PAGE_WRITE_USD = 0.000_000_625
"""One write unit a page: $0.625 a million pages, nothing fixed."""


def _scenario(pages: int, scanned_bytes: int) -> dict[str, Any]:
    """A metered run of ``pages`` pages: 18 PUTs a run plus half a PUT a page, a write unit a page, no other calls
    (so Lambda compute is the fetcher's wait alone, a page at a time)."""
    return {
        "label": LABEL,
        "crawl": "demo-books",
        "pages": pages,
        "cost": {
            "s3_put_class": RUN_PUT_USD + PAGE_PUT_USD * pages,
            "dynamodb_writes": PAGE_WRITE_USD * pages,
            "sqs": 0.0,
        },
        "calls": {},
        "s3": {"bytes_up": 0, "bytes_down": 0},
        "linking_page_lookups": 0,
        "parquet_copy": {"pages": pages, "queries": [{"table": "demo_books", "scanned_bytes": scanned_bytes}]},
    }


def _report(*scenarios: dict[str, Any]) -> dict[str, Any]:
    return {
        "memory_mb": {"scheduler": 512, "fetcher": 512, "finalizer": 1024},
        "site_latency_ms": 300,
        "prices": vars(US_EAST_1),
        "scenarios": [scenarios[-1]],
        "small_scenarios": list(scenarios[:-1]),
    }


def test_the_slope_and_the_intercept_of_two_runs() -> None:
    """500 pages cost $0.00034, 2,000 pages $0.00109: $0.50 a million pages and $0.00009 a run, where the
    2,000-page run scaled would say $0.545 a million."""
    fitted = cost_report.fit(500, {"s3": 0.000_34}, 2_000, {"s3": 0.001_09})
    assert fitted["per_million"]["s3"] == pytest.approx(0.50)
    assert fitted["fixed"]["s3"] == pytest.approx(0.000_09)
    scaled = 0.001_09 / 2_000 * 1e6  # what the single run scaled said
    assert scaled == pytest.approx(0.545)


def test_two_runs_of_one_size_have_no_slope() -> None:
    with pytest.raises(ValueError, match="more pages"):
        cost_report.fit(2_000, {"s3": 0.001}, 2_000, {"s3": 0.001})


def test_a_line_that_falls_with_more_pages_is_warned_of_not_clamped() -> None:
    # The scale model's per-page figures and this report's lines share one fit (sluice_tools.meter.fit).
    with pytest.warns(NegativeSlopeWarning, match="s3 falls from 0.002 at 500 pages to 0.001 at 2000"):
        fitted = cost_report.fit(500, {"s3": 0.002}, 2_000, {"s3": 0.001})
    assert fitted["per_million"]["s3"] == pytest.approx(-0.001 / 1500 * 1e6)


def test_per_million_is_the_slope_and_a_1m_run_adds_the_fixed_part_once() -> None:
    # The copy reads 500,000 bytes whatever the run's size and 6,000 bytes a page.
    small, large = _scenario(500, 500_000 + 6_000 * 500), _scenario(2_000, 500_000 + 6_000 * 2_000)
    fitted = cost_report.per_million(_report(small, large), large, 16)
    assert fitted["per_million"]["s3_put_class"] == pytest.approx(0.50)
    assert fitted["fixed"]["s3_put_class"] == pytest.approx(0.000_09)
    assert fitted["per_million"]["dynamodb_writes"] == pytest.approx(0.625)
    assert fitted["fixed"]["dynamodb_writes"] == pytest.approx(0.0, abs=1e-12)
    # The fetcher's wait: 7 rounds of 300 ms and 14 calls of 10 ms a batch of 100 pages at 512 MB.
    fetcher_usd = 1e6 / 100 * (7 * 0.3 + 14 * 0.010) * 0.5 * US_EAST_1.lambda_per_gb_s
    assert fitted["per_million"]["lambda_compute"] == pytest.approx(fetcher_usd)
    assert fitted["fixed"]["lambda_compute"] == pytest.approx(0.0, abs=1e-12)
    # A million pages' copy reads 6,000,500,000 bytes, billed as one query that size; nothing of it is fixed.
    athena = parquet_copy_cost.billed_bytes(6_000_500_000) / TB * US_EAST_1.athena_per_tb_scanned
    assert fitted["per_million"]["athena_scan"] == pytest.approx(athena)
    assert fitted["fixed"]["athena_scan"] == 0.0
    assert fitted["per_million"]["total"] == pytest.approx(0.50 + 0.625 + fetcher_usd + athena)
    assert fitted["fixed"]["total"] == pytest.approx(0.000_09)
    assert fitted["run"]["total"] == pytest.approx(0.50 + 0.625 + fetcher_usd + athena + 0.000_09)
    # The 2,000-page run scaled by 500 would have counted its 18 PUTs 500 times: $0.045 more.
    scaled_puts = large["cost"]["s3_put_class"] * 500
    assert scaled_puts == pytest.approx(0.545)
    assert fitted["per_million"]["s3_put_class"] != pytest.approx(scaled_puts)


def test_a_report_of_one_size_scales_that_run_as_before() -> None:
    large = _scenario(2_000, 13_000_000)
    report = _report(large)
    fitted = cost_report.per_million(report, large, 16)
    assert fitted["per_million"]["s3_put_class"] == pytest.approx(0.545)
    assert fitted["fixed"]["total"] == pytest.approx(0.0, abs=1e-12)
    assert parquet_copy_cost.at_pages(large, None, 1_000_000) == [
        {"table": "demo_books", "scanned_bytes": pytest.approx(6_500_000_000)}
    ]


def test_a_small_runs_copy_is_billed_its_10_mb_and_a_million_pages_at_their_size() -> None:
    small, large = _scenario(500, 500_000 + 6_000 * 500), _scenario(2_000, 500_000 + 6_000 * 2_000)
    # 3,500,000 bytes: billed 10 MB; 12,500,000 bytes: 12 MB (binary, rounded up).
    assert parquet_copy_cost.price(small["parquet_copy"]["queries"]) == pytest.approx(10 * MB / TB * 5)
    assert parquet_copy_cost.price(large["parquet_copy"]["queries"]) == pytest.approx(12 * MB / TB * 5)
    at_a_million = parquet_copy_cost.at_pages(large, small, 1_000_000)
    assert at_a_million == [{"table": "demo_books", "scanned_bytes": pytest.approx(6_000_500_000)}]

"""The Parquet copy's Athena scan as `make cost` prices it: each UNLOAD's bytes measured from the run's JSON Lines
objects, billed a query at a time (rounded up to the MB, 10 MB at least, $5 per TB)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import parquet_copy_cost
from bench.parquet_copy_cost import MB, TB

from sluice.domain.cost import US_EAST_1
from sluice.domain.layout import records_file, summary_key
from sluice.spec import parse_spec
from sluice_tools.emulate import state

RUN = "20261201T000000Z-abc123"
FIELDS = {"item": "li", "fields": {"title": "a::text"}}


def _write(state_dir: Path, key: str, size: int) -> None:
    path = state.object_path(state_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_a_runs_unload_scans_exactly_its_json_lines_files(tmp_path: Path) -> None:
    spec = parse_spec({"name": "shop", "seeds": {"urls": ["https://example.com/"]}, "extract": FIELDS})
    _write(tmp_path, records_file("shop", RUN, 0), 1_000)
    _write(tmp_path, records_file("shop", RUN, 1), 2_500)
    _write(tmp_path, records_file("shop", RUN, 0).replace("part-", "_part-"), 999)  # Athena skips "_" names
    _write(tmp_path, summary_key("shop", RUN), 777)  # beside records/: not in the table
    _write(tmp_path, records_file("shop", "20261130T000000Z-000000", 0), 5_000)  # another run
    assert parquet_copy_cost.scanned_bytes(tmp_path, spec, RUN) == [{"table": "shop", "scanned_bytes": 3_500}]


def test_a_typed_run_has_one_unload_a_type_each_reading_its_types_folder(tmp_path: Path) -> None:
    spec = parse_spec(
        {
            "name": "typed",
            "seeds": {"urls": ["https://example.com/list"]},
            "types": {
                "listing": {"pages": "/list", "extract": FIELDS, "follow": {"items": {"selectors": ["li a"]}}},
                "item": {"via": ["items"], "extract": {"fields": {"title": "h1::text"}}},
            },
        }
    )
    _write(tmp_path, records_file("typed", RUN, 0, "listing"), 300)
    _write(tmp_path, records_file("typed", RUN, 1, "item"), 4_000)
    scans = {q["table"]: q["scanned_bytes"] for q in parquet_copy_cost.scanned_bytes(tmp_path, spec, RUN)}
    assert scans == {"typed__listing": 300, "typed__item": 4_000}


def test_a_query_is_billed_at_least_10_mb_and_by_the_started_mb() -> None:
    assert parquet_copy_cost.billed_bytes(0) == 10 * MB
    assert parquet_copy_cost.billed_bytes(10 * MB + 1) == 11 * MB
    assert parquet_copy_cost.price([{"scanned_bytes": 1}, {"scanned_bytes": 1}]) == pytest.approx(20 * MB / TB * 5)


def test_a_million_pages_scale_each_query_before_it_is_billed() -> None:
    """2,000 pages of 6.5 KB: 13 MB a run; a million pages: 6.5 GB, about $0.030 (binary TB, as AWS bills)."""
    scenario = {"pages": 2_000, "parquet_copy": {"queries": [{"scanned_bytes": 13_000_000}]}}
    expected = parquet_copy_cost.billed_bytes(13_000_000 * 500) / TB * US_EAST_1.athena_per_tb_scanned
    assert parquet_copy_cost.per_million(scenario) == pytest.approx(expected)
    assert parquet_copy_cost.per_million(scenario) == pytest.approx(0.0296, abs=0.0001)
    small = {"pages": 2_000, "parquet_copy": {"queries": [{"scanned_bytes": 100}]}}  # 10 MB billed, not 50 KB
    assert parquet_copy_cost.per_million(small) == pytest.approx(10 * MB / TB * 5)
    assert parquet_copy_cost.per_million({"pages": 2_000}) == 0.0  # a report from before the copy was priced

"""docs/querying.md against the stack: queries name their runs and read real columns; limits are the config's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from infra.config import DEFAULT
from infra.crawls import deployed_specs

from sluice.pipeline.finalize.columnar import unloads
from sluice.spec import load_spec
from sluice.spec.columns import PARTITIONS, record_columns, table_name

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "querying.md").read_text(encoding="utf-8")
QUERIES = re.findall(r"```sql\n(.*?)```", GUIDE, flags=re.DOTALL)
TABLES = {table_name(s.name): s for s in deployed_specs()} | {
    f"{table_name(s.name)}_parquet": s for s in deployed_specs()
}  # each table's twin over the run's Parquet copy has its columns


def test_the_guide_has_its_three_first_queries() -> None:
    assert len(QUERIES) >= 3


def test_the_guide_gives_the_parquet_copys_unload_as_the_code_writes_it() -> None:
    spec = load_spec(Path(__file__).resolve().parents[2] / "crawls" / "books-toscrape.yaml")
    (copy,) = unloads(spec, "RECORDS_BUCKET", "20261202T031700Z-4d5e6f")
    assert f"```text\n{copy.sql}\n```" in GUIDE


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.split("\n", 1)[0][:40])
def test_every_query_names_its_runs_as_literals(query: str) -> None:
    """The run partition is injected: a query that does not name its runs is refused."""
    reads = len([t for t in re.findall(r"\bFROM (\w+)", query) if t in TABLES])
    named = len(re.findall(r"WHERE run (?:= '[^']+'|IN \('[^']+'(?:, '[^']+')*\))", query))
    assert reads == named >= 1


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.split("\n", 1)[0][:40])
def test_every_query_reads_a_deployed_table_and_its_columns(query: str) -> None:
    tables = set(re.findall(r"(?<!DISTINCT )\bFROM (\w+)", query)) - {"old_run", "new_run"}
    assert tables
    assert tables <= set(TABLES)
    columns = {c.name for t in tables for c in record_columns(TABLES[t])} | {c.name for c in PARTITIONS}
    used = set(re.findall(r"(?:\bold_run|\bnew_run)\.(\w+)", query)) | set(re.findall(r"\bcount\((\w+)\)", query))
    assert used <= columns


def test_the_guide_states_the_workgroups_scan_limit() -> None:
    assert f"scans more than **{DEFAULT.query_scan_limit_gb} GB**" in GUIDE


def test_the_guide_states_how_long_results_are_kept() -> None:
    assert f"expire after {DEFAULT.query_results_retention_days} days" in GUIDE


def test_the_guide_names_the_stages_database_and_workgroup() -> None:
    assert f"`{DEFAULT.glue_database}`" in GUIDE
    assert f"`{DEFAULT.workgroup}`" in GUIDE

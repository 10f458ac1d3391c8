"""A crawl's query columns: one definition for Athena's table and DuckDB's view."""

from __future__ import annotations

from pathlib import Path

from sluice.spec import load_spec
from sluice.spec.columns import PARTITIONS, Column, record_columns, table_name

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_crawl_columns_are_provenance_then_fields_typed_by_their_last_step() -> None:
    spec = load_spec(ROOT / "crawls" / "demo-books.yaml")
    columns = {c.name: c.type for c in record_columns(spec)}
    assert list(columns)[:2] == ["_key", "_page"]
    assert columns["price"] == "double"  # [strip, price]
    assert columns["title"] == "string"
    assert table_name(spec.name) == "demo_books"
    assert [c.name for c in PARTITIONS] == ["crawl", "run"]


def test_a_later_text_step_makes_a_number_text_again_and_many_makes_an_array() -> None:
    from sluice.spec import parse_spec

    spec = parse_spec(
        {
            "name": "t",
            "seeds": {"urls": ["https://example.com/"]},
            "extract": {
                "fields": {
                    "n": {"selector": "p::text", "process": ["int"]},
                    "s": {"selector": "p::text", "process": ["price", "strip"]},
                    "tags": {"selector": "li::text", "many": True, "process": ["number"]},
                    "Mixed": "h1::text",
                }
            },
        }
    )
    columns = {c.name: c for c in record_columns(spec)}
    assert columns["n"] == Column("n", "bigint")
    assert columns["s"].type == "string"
    assert columns["tags"].type == "array<double>"
    assert columns["tags"].duckdb == "DOUBLE[]"
    assert "mixed" in columns  # Athena's names are lower case

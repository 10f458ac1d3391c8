"""The Parquet copy in the template: the finalizer's Athena and Glue grants, the environment that names them,
and the ``_parquet`` tables over the copy (columns, partitions, projection, SerDe)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from infra.catalog import parquet_columns
from infra.config import DEFAULT
from infra.crawls import deployed_specs

from sluice.spec import parse_spec

from .conftest import render

SPECS = deployed_specs()
ARN = "arn:<AWS::Partition>:{service}:<AWS::Region>:<AWS::AccountId>"


def _finalizer_statements(resources: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for logical, r in resources.items()
        if r["Type"] == "AWS::IAM::Policy" and logical.startswith("FunctionsFinalizer")
        for statement in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_finalizer_starts_and_reads_queries_in_the_copys_workgroup_only(resources: dict[str, Any]) -> None:
    athena = [s for s in _finalizer_statements(resources) if any(a.startswith("athena:") for a in _listed(s["Action"]))]
    assert [(sorted(_listed(s["Action"])), [render(r) for r in _listed(s["Resource"])]) for s in athena] == [
        (
            ["athena:GetQueryExecution", "athena:StartQueryExecution"],
            [f"{ARN.format(service='athena')}:workgroup/sluice-dev-parquet-copy"],
        )
    ]  # not the users' sluice-dev-query, whose 20 GB cut-off would cancel a large run's copy


def _workgroups(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["Name"]: r["Properties"]["WorkGroupConfiguration"]
        for r in resources.values()
        if r["Type"] == "AWS::Athena::WorkGroup"
    }


def test_the_copy_runs_where_a_ten_million_page_run_fits_and_the_users_keep_their_20_gb(
    resources: dict[str, Any],
) -> None:
    """The workgroup the finalizer is told (SLUICE_WORKGROUP) cuts a query off past a 10M-page night of JSON Lines
    (6.5 KB a page, docs/querying.md), with room; the users' workgroup still cuts theirs off at 20 GB."""
    (finalizer,) = (
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("FunctionName") == DEFAULT.finalizer_function
    )
    workgroups = _workgroups(resources)
    copy = workgroups[finalizer["Environment"]["Variables"]["SLUICE_WORKGROUP"]]
    ten_million_pages = 10_000_000 * 6_500
    assert copy["BytesScannedCutoffPerQuery"] == DEFAULT.parquet_scan_limit_gb * 1_000_000_000 == 150_000_000_000
    assert copy["BytesScannedCutoffPerQuery"] >= 2 * ten_million_pages
    assert workgroups[DEFAULT.workgroup]["BytesScannedCutoffPerQuery"] == 20_000_000_000


def test_the_finalizer_reads_only_the_json_tables_its_unload_selects_from(resources: dict[str, Any]) -> None:
    glue = [s for s in _finalizer_statements(resources) if any(a.startswith("glue:") for a in _listed(s["Action"]))]
    (statement,) = glue
    assert sorted(_listed(statement["Action"])) == ["glue:GetDatabase", "glue:GetPartitions", "glue:GetTable"]
    arn = ARN.format(service="glue")
    assert sorted(render(r) for r in statement["Resource"]) == sorted(
        [f"{arn}:catalog", f"{arn}:database/sluice_dev", f"{arn}:table/sluice_dev/books_toscrape"]
    )  # not the _parquet tables: the copy writes files, never a table


def test_no_other_function_may_run_queries(resources: dict[str, Any]) -> None:
    others = [
        s
        for logical, r in resources.items()
        if r["Type"] == "AWS::IAM::Policy" and not logical.startswith("FunctionsFinalizer")
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith(("athena:", "glue:")) for a in _listed(s["Action"]))
    ]
    assert others == []


def test_every_function_is_told_the_workgroup_and_database(resources: dict[str, Any]) -> None:
    functions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
    named = [f for f in functions if f.get("FunctionName", "").startswith("sluice-dev-")]
    assert len(named) == 3
    for function in named:
        variables = function["Environment"]["Variables"]
        assert (variables["SLUICE_WORKGROUP"], variables["SLUICE_GLUE_DATABASE"]) == (
            DEFAULT.parquet_workgroup,
            DEFAULT.glue_database,
        )


def test_the_parquet_table_reads_the_copy_with_the_json_tables_columns_and_projection(
    resources: dict[str, Any], bucket_ref: str
) -> None:
    tables = {
        r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"]
        for r in resources.values()
        if r["Type"] == "AWS::Glue::Table"
    }
    json_table, parquet = tables["books_toscrape"], tables["books_toscrape_parquet"]
    assert parquet["StorageDescriptor"]["Columns"] == json_table["StorageDescriptor"]["Columns"]
    assert parquet["PartitionKeys"] == json_table["PartitionKeys"]
    projected = {k: v for k, v in parquet["Parameters"].items() if k.startswith("projection.")}
    assert projected == {k: v for k, v in json_table["Parameters"].items() if k.startswith("projection.")}
    assert render(parquet["Parameters"]["storage.location.template"]) == (
        f"s3://{bucket_ref}/runs/crawl=${{crawl}}/run=${{run}}/parquet/"
    )
    descriptor = parquet["StorageDescriptor"]
    assert descriptor["SerdeInfo"] == {
        "SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
    }
    assert descriptor["InputFormat"] == "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
    assert parquet["Parameters"]["classification"] == "parquet"
    assert json.dumps(parquet).count("records/") == 0  # never over the JSON Lines


def test_over_every_type_a_column_two_types_type_differently_is_left_out() -> None:
    """A type's files have each column as that type types it: a column two types disagree on cannot be read
    as one type over every type's files, so the crawl's Parquet table leaves it to the types' own tables."""
    spec = parse_spec(
        {
            "name": "clash",
            "seeds": {"urls": ["https://example.com/"]},
            "types": {
                "listing": {
                    "pages": "/list",
                    "extract": {"item": "li", "fields": {"title": "a::text", "count": "b::text"}},
                    "follow": {"items": {"selectors": ["li a"]}},
                },
                "item": {
                    "via": ["items"],
                    "extract": {"fields": {"title": "h1::text", "count": {"selector": "i::text", "process": ["int"]}}},
                },
            },
        }
    )
    assert [(c.name, c.type) for c in parquet_columns(spec)] == [
        ("_key", "string"),
        ("_page", "string"),
        ("_type", "string"),
        ("title", "string"),
    ]


@pytest.mark.parametrize("value", [0, -5, 10_001, 2.5, "150"])
def test_a_parquet_scan_limit_out_of_range_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises(ValueError, match=r"^parquet_scan_limit_gb .*: whole gigabytes from 1 to 10,000 "):
        dataclasses.replace(DEFAULT, parquet_scan_limit_gb=value)  # type: ignore[arg-type]  # wrong types on purpose


def test_the_parquet_scan_limit_sets_the_copys_cut_off_and_leaves_the_users() -> None:
    config = dataclasses.replace(DEFAULT, parquet_scan_limit_gb=400)
    assert (config.parquet_bytes_scanned_cutoff, config.query_bytes_scanned_cutoff) == (
        400_000_000_000,
        20_000_000_000,
    )

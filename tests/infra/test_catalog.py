"""The Glue catalog over the output: a table per crawl whose columns, partitions and projection match the layout.

The deployed stack holds only specs with a public host, so the demo crawl (loopback) is checked
on a stack built from every spec in ``crawls/``: the same construct, the same code path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template
from infra.app import context
from infra.config import DEFAULT
from infra.crawls import CRAWLS, deployed_specs
from infra.stack import SluiceStack

from sluice.domain.layout import records_file, records_prefix
from sluice.spec import SPEC_SUFFIXES, CrawlSpec, load_spec, parse_spec
from sluice.spec.columns import partitions, record_columns, table_name, type_table_name
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner.local import LocalFleet

from .conftest import render

SPECS = deployed_specs()
EVERY_SPEC = [load_spec(p, named_after_file=True) for p in sorted(CRAWLS.iterdir()) if p.suffix in SPEC_SUFFIXES]
DEMO = next(s for s in EVERY_SPEC if s.name == "demo-books")
RUN_ID = "20261201T021500Z-1a2b3c"


@pytest.fixture(scope="module")
def every_crawl() -> tuple[dict[str, Any], str]:
    """The resources of a stack of every spec in crawls/ (the demo's included), and its bucket's ``Ref``."""
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = SluiceStack(app, "Sluice-every-crawl", config=DEFAULT, specs=EVERY_SPEC)
    bucket = f"<{stack.get_logical_id(stack.storage.bucket.node.default_child)}>"  # type: ignore[arg-type]
    return Template.from_stack(stack).to_json()["Resources"], bucket


def _tables(resources: dict[str, Any], *, parquet: bool = False) -> dict[str, dict[str, Any]]:
    """The tables over the JSON Lines (or, with ``parquet``, their twins over the Parquet copy), by name."""
    return {
        r["Properties"]["TableInput"]["Name"]: r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Glue::Table"
        and (r["Properties"]["TableInput"]["Parameters"]["classification"] == "parquet") == parquet
    }


def _table(every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec) -> dict[str, Any]:
    table: dict[str, Any] = _tables(every_crawl[0])[table_name(spec.name)]["TableInput"]
    return table


def test_the_stage_has_one_database_named_after_prefix_and_stage(resources: dict[str, Any]) -> None:
    (database,) = (r["Properties"] for r in resources.values() if r["Type"] == "AWS::Glue::Database")
    assert database["DatabaseInput"]["Name"] == DEFAULT.glue_database == "sluice_dev"


def test_each_deployed_crawl_has_a_table_and_its_parquet_twin_in_the_stage_database(resources: dict[str, Any]) -> None:
    tables, twins = _tables(resources), _tables(resources, parquet=True)
    assert sorted(tables) == sorted(table_name(s.name) for s in SPECS)
    assert sorted(twins) == sorted(f"{table_name(s.name)}_parquet" for s in SPECS)
    assert {t["DatabaseName"] for t in [*tables.values(), *twins.values()]} == {DEFAULT.glue_database}


@pytest.mark.parametrize("spec", EVERY_SPEC, ids=lambda s: s.name)
def test_columns_are_the_record_columns_of_the_spec(every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec) -> None:
    columns = _table(every_crawl, spec)["StorageDescriptor"]["Columns"]
    assert [(c["Name"], c["Type"]) for c in columns] == [(c.name, c.type) for c in record_columns(spec)]


def test_the_demo_table_reads_provenance_then_its_fields_with_price_a_double(
    every_crawl: tuple[dict[str, Any], str],
) -> None:
    columns = _table(every_crawl, DEMO)["StorageDescriptor"]["Columns"]
    assert [(c["Name"], c["Type"]) for c in columns] == [
        ("_key", "string"),
        ("_page", "string"),
        ("title", "string"),
        ("url", "string"),
        ("price", "double"),
        ("rating", "string"),
        ("availability", "string"),
    ]


@pytest.mark.parametrize("spec", EVERY_SPEC, ids=lambda s: s.name)
def test_partition_keys_are_crawl_then_run(every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec) -> None:
    keys = _table(every_crawl, spec)["PartitionKeys"]
    assert [(k["Name"], k["Type"]) for k in keys] == [(c.name, c.type) for c in partitions(spec)]
    assert [k["Name"] for k in keys] == ["crawl", "run", *(["type"] if spec.types is not None else [])]


@pytest.mark.parametrize("spec", EVERY_SPEC, ids=lambda s: s.name)
def test_projection_enumerates_the_crawl_and_injects_the_run(
    every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec
) -> None:
    parameters = _table(every_crawl, spec)["Parameters"]
    typed = {"projection.type.type": "enum", "projection.type.values": ",".join(spec.types or {})}
    assert {k: v for k, v in parameters.items() if k.startswith("projection.")} == {
        "projection.enabled": "true",
        "projection.crawl.type": "enum",
        "projection.crawl.values": spec.name,
        "projection.run.type": "injected",
        **(typed if spec.types is not None else {}),
    }


@pytest.mark.parametrize("spec", EVERY_SPEC, ids=lambda s: s.name)
def test_location_template_is_the_layouts_records_folder(
    every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec
) -> None:
    _, bucket = every_crawl
    template = render(_table(every_crawl, spec)["Parameters"]["storage.location.template"])
    typed = "type=${type}/" if spec.types is not None else ""
    assert template == f"s3://{bucket}/runs/crawl=${{crawl}}/run=${{run}}/records/{typed}"
    # A run's first records file, as the finalizer names it, sits right in the projected folder.
    kind = next(iter(spec.types)) if spec.types is not None else None
    folder = template.replace("${crawl}", spec.name).replace("${run}", RUN_ID).replace("${type}", str(kind))
    key = records_file(spec.name, RUN_ID, 0, kind)
    assert f"s3://{bucket}/{key}".rsplit("/", 1)[0] + "/" == folder


@pytest.mark.parametrize("spec", EVERY_SPEC, ids=lambda s: s.name)
def test_table_location_is_the_crawls_folder_of_runs(every_crawl: tuple[dict[str, Any], str], spec: CrawlSpec) -> None:
    _, bucket = every_crawl
    location = render(_table(every_crawl, spec)["StorageDescriptor"]["Location"])
    assert location == f"s3://{bucket}/runs/crawl={spec.name}/"


def test_tables_read_json_lines_with_the_openx_serde_and_fail_on_a_malformed_line(
    every_crawl: tuple[dict[str, Any], str],
) -> None:
    descriptor = _table(every_crawl, DEMO)["StorageDescriptor"]
    assert descriptor["InputFormat"] == "org.apache.hadoop.mapred.TextInputFormat"
    assert descriptor["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    assert descriptor["SerdeInfo"]["Parameters"]["ignore.malformed.json"] == "FALSE"
    assert descriptor["SerdeInfo"]["Parameters"]["case.insensitive"] == "TRUE"


def test_tables_are_created_after_their_database(resources: dict[str, Any]) -> None:
    (database,) = (k for k, r in resources.items() if r["Type"] == "AWS::Glue::Database")
    for table in (r for r in resources.values() if r["Type"] == "AWS::Glue::Table"):
        assert database in table.get("DependsOn", [])


_HIVE_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "double": (int, float), "bigint": (int,)}


def _fits(value: Any, hive: str) -> bool:
    if value is None:
        return True
    if hive.startswith("array<"):
        return isinstance(value, list) and all(_fits(v, hive[6:-1]) for v in value)
    return isinstance(value, _HIVE_TYPES[hive]) and not isinstance(value, bool)


def test_a_real_runs_output_is_what_the_table_reads(every_crawl: tuple[dict[str, Any], str], tmp_path: Path) -> None:
    """The demo crawl run for real: its part files sit where the projection points, and every line's keys
    are the table's columns (as the case-insensitive SerDe matches them) with values of their types."""
    table = _table(every_crawl, DEMO)
    columns = {c["Name"]: c["Type"] for c in table["StorageDescriptor"]["Columns"]}
    template = render(table["Parameters"]["storage.location.template"])
    with running_demo_site(books=60) as site:
        text = (CRAWLS / "demo-books.yaml").read_text(encoding="utf-8").replace("http://127.0.0.1:8710", site.base_url)
        data = yaml.safe_load(text.replace(r"127\.0\.0\.1:8710", re.escape(site.base_url.split("//", 1)[1])))
        data["seeds"]["range"]["stop"] = 3
        specs = tmp_path / "crawls"
        specs.mkdir()
        (specs / "demo-books.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        run = LocalFleet(specs, tmp_path / "state", workers=1, allow_loopback=True).run(parse_spec(data))
    assert run.summary.to_json()["records"]["total"] == 60
    objects = tmp_path / "state" / "objects"
    parts = sorted((objects / records_prefix(DEMO.name, run.run_id)).glob("part-*.jsonl"))
    assert parts
    folder = template.split("/", 3)[3].replace("${crawl}", DEMO.name).replace("${run}", run.run_id)
    lines = []
    for part in parts:
        assert part.relative_to(objects).as_posix().rsplit("/", 1)[0] + "/" == folder
        lines += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 60
    for line in lines:
        assert {key.lower() for key in line} == set(columns)
        assert all(_fits(value, columns[key.lower()]) for key, value in line.items()), line


def test_each_page_types_table_reads_what_a_real_run_of_the_typed_demo_wrote(
    every_crawl: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """crawls/demo-types.yaml run for real: each type's part files sit where its own table's projection points,
    and every line's keys are that table's columns (the carried one included) with values of their types."""
    spec = next(s for s in EVERY_SPEC if s.name == "demo-types")
    tables = _tables(every_crawl[0])
    with running_demo_site(books=40) as site:
        text = (CRAWLS / "demo-types.yaml").read_text(encoding="utf-8").replace("http://127.0.0.1:8710", site.base_url)
        data = yaml.safe_load(text)
        data["seeds"]["range"]["stop"] = 2
        specs = tmp_path / "crawls"
        specs.mkdir()
        (specs / "demo-types.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        run = LocalFleet(specs, tmp_path / "state", workers=1, allow_loopback=True).run(parse_spec(data))
    assert run.summary.to_json()["records"]["by_type"] == {"book": 40, "listing": 40}
    objects = tmp_path / "state" / "objects"
    for kind in spec.types or {}:
        table = tables[type_table_name(spec.name, kind)]["TableInput"]
        columns = {c["Name"]: c["Type"] for c in table["StorageDescriptor"]["Columns"]}
        template = render(table["Parameters"]["storage.location.template"])
        folder = template.split("/", 3)[3].replace("${crawl}", spec.name).replace("${run}", run.run_id)
        parts = sorted((objects / folder).glob("part-*.jsonl"))
        lines = [json.loads(line) for part in parts for line in part.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == 40
        for line in lines:
            assert {key.lower() for key in line} == set(columns), kind
            assert all(_fits(value, columns[key.lower()]) for key, value in line.items()), line
    assert "found_on" in columns  # the book table has the field its listing carried to it


def test_a_typed_spec_has_a_table_for_all_types_and_one_per_type_with_what_is_carried_to_it() -> None:
    """Page types land under records/type=NAME/: the crawl's table has a third partition key, an enum of the
    spec's types; each type's own table reads its folder alone, with its fields and the ones carried to it
    typed as the carrying type has them (a field two types type differently is the union table's weak spot)."""
    spec = parse_spec(
        {
            "name": "typed",
            "seeds": {"urls": ["https://example.com/"]},
            "types": {
                "listing": {
                    "pages": "/list",
                    "extract": {
                        "item": "li",
                        "fields": {"title": "a::text", "price": {"selector": "b::text", "process": ["price"]}},
                    },
                    "follow": {"items": {"selectors": ["li a"], "carry": ["price"]}},
                },
                "item": {"via": ["items"], "extract": {"fields": {"name": "h1::text", "title": "h2::text"}}},
            },
        }
    )
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = SluiceStack(app, "Sluice-typed", config=DEFAULT, specs=[spec])
    bucket = f"<{stack.get_logical_id(stack.storage.bucket.node.default_child)}>"  # type: ignore[arg-type]
    resources = Template.from_stack(stack).to_json()["Resources"]
    tables = {name: t["TableInput"] for name, t in _tables(resources).items()}
    assert sorted(tables) == ["typed", "typed__item", "typed__listing"]
    twins = {name: t["TableInput"] for name, t in _tables(resources, parquet=True).items()}
    assert sorted(twins) == ["typed__item_parquet", "typed__listing_parquet", "typed_parquet"]

    table = tables["typed"]
    assert [k["Name"] for k in table["PartitionKeys"]] == ["crawl", "run", "type"]
    parameters = table["Parameters"]
    assert (parameters["projection.type.type"], parameters["projection.type.values"]) == ("enum", "listing,item")
    template = render(parameters["storage.location.template"])
    assert template == f"s3://{bucket}/runs/crawl=${{crawl}}/run=${{run}}/records/type=${{type}}/"

    item = tables["typed__item"]
    columns = [(c["Name"], c["Type"]) for c in item["StorageDescriptor"]["Columns"]]
    assert columns == [
        ("_key", "string"),
        ("_page", "string"),
        ("_type", "string"),
        ("name", "string"),
        ("title", "string"),
        ("price", "double"),  # carried from the listing, typed as the listing's price step makes it
    ]
    assert [k["Name"] for k in item["PartitionKeys"]] == ["crawl", "run"]
    assert "projection.type.type" not in item["Parameters"]
    template = render(item["Parameters"]["storage.location.template"])
    assert template == f"s3://{bucket}/runs/crawl=${{crawl}}/run=${{run}}/records/type=item/"
    listing = [c["Name"] for c in tables["typed__listing"]["StorageDescriptor"]["Columns"]]
    assert listing == ["_key", "_page", "_type", "title", "price"]

    # Over the Parquet copy: each type's files have its own columns, as its JSON table; the crawl's table over
    # every type has the JSON table's (no field here is typed two ways: test_parquet_copy has one that is).
    assert twins["typed_parquet"]["StorageDescriptor"]["Columns"] == table["StorageDescriptor"]["Columns"]
    assert twins["typed__item_parquet"]["StorageDescriptor"]["Columns"] == item["StorageDescriptor"]["Columns"]
    assert render(twins["typed__item_parquet"]["Parameters"]["storage.location.template"]) == (
        f"s3://{bucket}/runs/crawl=${{crawl}}/run=${{run}}/parquet/type=item/"
    )
    assert render(twins["typed_parquet"]["Parameters"]["storage.location.template"]) == (
        f"s3://{bucket}/runs/crawl=${{crawl}}/run=${{run}}/parquet/type=${{type}}/"
    )

    # The query policy reads each of the six tables and no other.
    policy = next(r for r in resources.values() if r["Type"] == "AWS::IAM::ManagedPolicy")
    statement = next(st for st in policy["Properties"]["PolicyDocument"]["Statement"] if st["Sid"] == "ReadTheCatalog")
    named = sorted(render(r).rsplit("/", 1)[-1] for r in statement["Resource"] if ":table/" in render(r))
    assert named == sorted([*tables, *twins])

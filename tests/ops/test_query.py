"""`sluice query`: the same SQL over the local output as Athena runs over the Glue table of columns.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sluice.spec import load_spec
from sluice.spec.columns import record_columns
from sluice_tools.ops.query import CrawlTable

from .conftest import Cli, LocalCrawls, record_lines

# A crawl whose fields have every type a column can have, and a name in upper case.
TYPED_SPEC = """\
name: typed-books
seeds: {{template: "http://127.0.0.1:{port}/catalogue/page-{{n}}.html", range: {{start: 1, stop: 3}}}}
extract:
  item: article.product_pod
  fields:
    Title: {{selector: "h3 a::attr(title)", required: true}}
    url: {{selector: "h3 a::attr(href)", process: [strip, absolute_url], required: true}}
    price: {{selector: "p.price_color::text", process: [strip, price]}}
    number: {{selector: "h3 a::attr(href)", process: [{{regex: '_(\\d+)/index'}}, int]}}
    links: {{selector: "a::attr(href)", many: true}}
  key: [url]
politeness: {{concurrency: 4, concurrency_per_domain: 4}}
"""


def test_a_count_of_one_run_equals_its_summarys_record_count(local: LocalCrawls, sluice: Cli) -> None:
    first, second = local.run(), local.run()
    for run in (first, second):
        sql = f"SELECT count(*) AS n FROM demo_books WHERE run = '{run['run_id']}'"  # noqa: S608 - the test's own run id
        assert sluice.json(
            "query", sql, "--state", str(local.state), "--specs", str(local.specs), "--format", "json"
        ) == [{"n": run["records"]["total"]}]
    assert first["records"]["total"] == 1000


def test_a_query_by_price_returns_the_records_of_that_price(local: LocalCrawls, sluice: Cli) -> None:
    run = local.run()
    lines = record_lines(Path(run["outputs"]["records"]))
    cheap = sorted((r["price"], r["title"]) for r in lines if r["price"] < 15)
    assert 0 < len(cheap) < len(lines)

    sql = "SELECT price, title FROM demo_books WHERE price < 15 ORDER BY price, title"
    rows = sluice.json("query", sql, "--state", str(local.state), "--specs", str(local.specs), "--format", "json")
    assert [(r["price"], r["title"]) for r in rows] == cheap

    code, table, _ = sluice("query", sql, "--state", str(local.state), "--specs", str(local.specs))
    assert code == 0
    header, rule, *body, count = table.splitlines()
    assert header.split() == ["price", "title"]
    assert set(rule) == {"-", " "}
    assert count == f"({len(cheap)} rows)"
    assert body[0].split(maxsplit=1) == [repr(cheap[0][0]), cheap[0][1]]


def test_each_view_has_the_glue_tables_columns_and_types(local: LocalCrawls, sluice: Cli) -> None:
    local.run()
    rows = sluice.json(
        "query", "DESCRIBE demo_books", "--state", str(local.state), "--specs", str(local.specs), "--format", "json"
    )
    # Written out, not derived from columns.py: the record's own two, the spec's fields in its order with
    # price a number (its `price` step), then the two partitions of the Glue table.
    assert [(r["column_name"], r["column_type"]) for r in rows] == [
        ("_key", "VARCHAR"),
        ("_page", "VARCHAR"),
        ("title", "VARCHAR"),
        ("url", "VARCHAR"),
        ("price", "DOUBLE"),
        ("rating", "VARCHAR"),
        ("availability", "VARCHAR"),
        ("crawl", "VARCHAR"),
        ("run", "VARCHAR"),
    ]


TYPED_COLUMNS = [
    ("_key", "string"),
    ("_page", "string"),
    ("title", "string"),  # `Title` in the spec: Glue's names have no case
    ("url", "string"),
    ("price", "double"),  # the `price` step makes a number
    ("number", "bigint"),  # the `int` step
    ("links", "array<string>"),  # `many: true`
]
"""The Glue table's columns for TYPED_SPEC, spelled out (the partitions crawl and run come after)."""


def glue_reads(line: dict[str, Any], columns: list[tuple[str, str]], crawl: str, run: str) -> dict[str, Any]:
    """A record line as the Glue table reads it: keys matched without case (the JSON SerDe's default), each
    value of its column's type, absent keys null, other keys ignored; then the partitions from the path."""
    by_name = {k.lower(): v for k, v in line.items()}
    cast = {"string": str, "bigint": int, "double": float}

    def typed(kind: str, value: Any) -> Any:
        if value is None:
            return None
        if kind.startswith("array<"):
            return [typed(kind[6:-1], v) for v in value]
        return cast[kind](value)

    return {name: typed(kind, by_name.get(name)) for name, kind in columns} | {"crawl": crawl, "run": run}


def test_the_same_sql_returns_the_rows_the_glue_table_implies(local: LocalCrawls, sluice: Cli, site: Any) -> None:
    spec_path = local.add_spec("typed-books", TYPED_SPEC.format(port=site.port))
    run = local.run("typed-books")
    assert [(c.name, c.type) for c in record_columns(load_spec(spec_path))] == TYPED_COLUMNS
    lines = record_lines(Path(run["outputs"]["records"]))
    assert len(lines) == 60
    assert all("Title" in line for line in lines)
    expected = sorted(
        (glue_reads(line, TYPED_COLUMNS, "typed-books", run["run_id"]) for line in lines), key=lambda r: r["_key"]
    )

    rows = sluice.json(
        "query",
        "SELECT * FROM typed_books ORDER BY _key",
        "--state",
        str(local.state),
        "--specs",
        str(local.specs),
        "--format",
        "json",
    )
    assert rows == expected
    assert rows[0]["title"]
    assert isinstance(rows[0]["number"], int)
    assert isinstance(rows[0]["links"], list)


def test_a_crawl_with_no_runs_is_an_empty_table(local: LocalCrawls, sluice: Cli, site: Any) -> None:
    local.run()
    local.add_spec("typed-books", TYPED_SPEC.format(port=site.port))
    args = ("--state", str(local.state), "--specs", str(local.specs), "--format", "json")
    assert sluice.json("query", "SELECT count(*) AS n FROM typed_books", *args) == [{"n": 0}]
    described = sluice.json("query", "DESCRIBE typed_books", *args)
    assert [r["column_name"] for r in described][-2:] == ["crawl", "run"]


def test_bad_sql_and_unknown_tables_are_one_line_naming_the_tables(local: LocalCrawls, sluice: Cli) -> None:
    local.run()
    for sql in ("SELECT * FROM books", "SELEKT 1"):
        code, out, err = sluice("query", sql, "--state", str(local.state), "--specs", str(local.specs))
        assert code == 2
        assert out == ""
        assert len(err.strip().splitlines()) == 1
        assert "(tables: demo_books (1 run with records))" in err
    assert (
        "Table with name books does not exist" in sluice("query", "SELECT * FROM books", "--state", str(local.state))[2]
    )


def test_csv_is_one_header_and_a_line_per_row(local: LocalCrawls, sluice: Cli) -> None:
    local.run()
    code, out, _ = sluice(
        "query",
        "SELECT rating, count(*) AS n FROM demo_books GROUP BY rating ORDER BY rating",
        "--state",
        str(local.state),
        "--specs",
        str(local.specs),
        "--format",
        "csv",
    )
    assert code == 0
    header, *rows = out.splitlines()
    assert header == "rating,n"
    assert sum(int(r.split(",")[1]) for r in rows) == 1000


CASE_TWINS = """\
name: twins
seeds: ["http://127.0.0.1:{port}/catalogue/page-1.html"]
extract:
  item: article.product_pod
  fields:
    Price: "p.price_color::text"
    price: "p.price_color::text"
"""


def test_a_crawl_whose_view_cannot_be_made_leaves_every_other_crawls_queries_working(
    local: LocalCrawls, sluice: Cli, site: Any, monkeypatch: Any
) -> None:
    """main validated fields `Price` and `price`, and then every `sluice query`, on any table, failed with
    "Binder Error: Duplicate named argument"; now the spec is refused, and a view that still cannot be made
    is left out on its own, with a note."""
    first = local.run()
    local.add_spec("twins", CASE_TWINS.format(port=site.port))
    args = ("--state", str(local.state), "--specs", str(local.specs), "--format", "json")
    code, out, err = sluice("query", "SELECT count(*) AS n FROM demo_books", *args)
    assert (code, json.loads(out)) == (0, [{"n": first["records"]["total"]}])
    assert "note: twins: its spec is invalid, no table (" in err
    assert "the same column as extract.fields.Price when case is ignored" in err

    local.add_spec("twins", CASE_TWINS.format(port=site.port).replace("    price:", "    cost:"))
    real = CrawlTable.view_sql

    def broken(table: CrawlTable) -> str:
        return "CREATE VIEW twins AS SELECT nonsense(" if table.crawl == "twins" else real(table)

    monkeypatch.setattr(CrawlTable, "view_sql", broken)
    code, out, err = sluice("query", "SELECT count(*) AS n FROM demo_books", *args)
    assert (code, json.loads(out)) == (0, [{"n": first["records"]["total"]}])
    assert "note: twins: its view cannot be made, no table (Parser Error" in err

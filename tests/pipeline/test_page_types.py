"""A spec with several page types: each type's records, keyed per type, in its own output, with carried fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.domain.layout import records_prefix
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.ops.query import crawl_tables, run_query

from .conftest import BOOKS, PAGES, Pipeline, local_harness

CRAWL = "typed-books"


def typed_spec(books_spec: Any, base_url: str) -> dict[str, Any]:
    """The demo crawl as two types: listing pages (book cards) and the book pages their cards link to."""
    data: dict[str, Any] = books_spec(CRAWL, base_url)
    listing = data.pop("extract")
    listing.pop("pages")
    data["follow"]["selectors"] = []
    data["types"] = {
        "listing": {
            "pages": r"/catalogue/page-\d+\.html$",
            "extract": listing,
            "follow": {"books": {"selectors": ["article.product_pod h3 a"], "carry": ["price", "rating"]}},
        },
        "book": {
            "via": ["books"],
            "extract": {
                "fields": {
                    "name": {"selector": "div.product_main h1::text", "required": True},
                    "url": "::page_url",
                    "rating": "p.not-on-the-page::text",
                },
                "key": ["url"],
            },
        },
    }
    return data


def test_a_two_type_spec_writes_each_types_records_keyed_per_type_with_carried_fields(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    pipeline.spec(typed_spec(books_spec, site.base_url))
    run_id = pipeline.run(CRAWL)
    records = pipeline.records(CRAWL, run_id)
    listings = [r for r in records if r["_type"] == "listing"]
    books = [r for r in records if r["_type"] == "book"]
    assert len(listings) == len(books) == PAGES * (BOOKS // PAGES)
    # Keys are per type: a card and its book page share the key (the book's URL), and both are kept.
    assert {r["_key"] for r in listings} == {r["_key"] for r in books}
    cards = {r["url"]: r for r in listings}
    for book in books:
        card = cards[book["url"]]
        assert book["price"] == card["price"]  # carried from the card
        assert book["rating"] == card["rating"]  # the page has none: the card's is merged in
        assert book["name"].startswith(card["title"][:10])
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["records"]["by_type"] == {"book": len(books), "listing": len(listings)}
    manifest_keys = {f["key"] for f in summary["outputs"]["files"]}
    prefix = records_prefix(CRAWL, run_id)
    assert {k.removeprefix(prefix).split("/")[0] for k in manifest_keys} == {"type=listing", "type=book"}


def test_a_second_run_of_a_typed_spec_carries_each_types_records(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    pipeline.spec(typed_spec(books_spec, site.base_url))
    first = pipeline.run(CRAWL)
    second = pipeline.run(CRAWL)  # nothing changed: 304s, every record carried from the first run's files
    before = sorted((r["_type"], r["_key"], r["price"]) for r in pipeline.records(CRAWL, first))
    after = sorted((r["_type"], r["_key"], r["price"]) for r in pipeline.records(CRAWL, second))
    assert after == before
    assert pipeline.summary(CRAWL, second)["records"]["duplicates_dropped"] == 0


def test_sluice_query_reads_every_types_records_with_their_type(
    site: RunningDemoSite, books_spec: Any, tmp_path: Path
) -> None:
    """On the local store, where `sluice query` reads: one view for all types, partitioned by type."""
    with local_harness(tmp_path) as harness:
        pipeline = Pipeline(harness)
        pipeline.spec(typed_spec(books_spec, site.base_url))
        run_id = pipeline.run(CRAWL)
    tables = crawl_tables(tmp_path / "state", tmp_path / "crawls")
    sql = f"SELECT _type, type, count(*), count(price) FROM typed_books WHERE run = '{run_id}' GROUP BY 1, 2 ORDER BY 1"  # noqa: S608
    _, rows = run_query(sql, tables)
    # The type partition (as Athena's table has it) agrees with each record's own _type; the books' prices
    # were carried from their cards.
    assert rows == [("book", "book", BOOKS, BOOKS), ("listing", "listing", BOOKS, BOOKS)]

"""A spec with several page types: each type's records, keyed per type, in its own output, with carried fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.domain.layout import records_prefix
from sluice.messages import UrlTask
from sluice.pipeline.links import parent_id
from sluice.spec import parse_spec
from sluice.spec.columns import PARTITIONS, type_columns
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.ops.query import crawl_tables, run_query
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text

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
    # Each type's own view: its fields and the ones carried to it, typed as the Glue table types them.
    spec = typed_spec(books_spec, site.base_url)
    parsed = parse_spec(spec)
    for kind in ("listing", "book"):
        _, described = run_query(f"DESCRIBE typed_books__{kind}", tables)
        expected = [(c.name, c.duckdb) for c in [*type_columns(parsed, kind), *PARTITIONS]]
        assert [(row[0], row[1]) for row in described] == expected
    sql = f"SELECT count(*), count(price), min(price) > 0 FROM typed_books__book WHERE run = '{run_id}'"  # noqa: S608
    assert run_query(sql, tables)[1] == [(BOOKS, BOOKS, True)]


def test_each_type_is_counted_and_judged_on_its_own(pipeline: Any, site: RunningDemoSite, books_spec: Any) -> None:
    """Summary per type; a second run whose book selector matches nothing is unhealthy for that type,
    though the run's total (the listings, half the records) stays at the record-count floor."""
    spec = typed_spec(books_spec, site.base_url)
    spec["alerts"] = {"record_count_floor": 0.5}
    pipeline.spec(spec)
    first = pipeline.run(CRAWL)
    types = pipeline.summary(CRAWL, first)["types"]
    per_type = BOOKS
    assert types["listing"] | {"null_rates": None} == {
        "pages": PAGES,
        "failed": 0,
        "records": per_type,
        "new": per_type,
        "changed": 0,
        "unchanged": 0,
        "items": per_type,
        "null_rates": None,
        "previous_records": None,
        "record_count_ratio": None,
    }
    assert (types["book"]["pages"], types["book"]["records"], types["book"]["new"]) == (BOOKS, BOOKS, BOOKS)
    # The book page has no rating: each is carried from its card, so no book record lacks one.
    assert types["book"]["null_rates"] == {}

    spec["types"]["book"]["extract"]["fields"]["name"]["selector"] = "div.redesigned h1::text"
    pipeline.spec(spec)
    second = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, second)
    assert summary["records"]["total"] == per_type  # only the listings' records
    assert summary["types"]["book"] | {"null_rates": None} == {
        "pages": BOOKS,
        "failed": 0,
        "records": 0,
        "new": 0,
        "changed": 0,
        "unchanged": 0,
        "items": BOOKS,
        "null_rates": None,
        "previous_records": BOOKS,
        "record_count_ratio": 0.0,
    }
    assert summary["types"]["listing"]["record_count_ratio"] == 1.0
    text = as_text(LocalRun(CRAWL, second, summary, [], {"records": "records/", "summary": "summary.json"}))
    book_line = (
        f"  type book: {BOOKS} page(s), 0 records (new 0, changed 0), previous run {BOOKS}; name missing in 100%"
    )
    assert book_line in text.splitlines()
    assert "ALERT records_nonzero:book: type 'book' collected 0 records" in text
    checks = {c["check"]: c["ok"] for c in summary["verdict"]["checks"]}
    assert checks["record_count_drop"]  # half the run's records: at the floor, the total alone looks fine
    alerts = {a["check"] for a in summary["verdict"]["alerts"]}
    assert alerts == {"records_nonzero:book", "record_count_drop:book"}
    assert not summary["verdict"]["healthy"]


def test_a_page_seeded_from_the_catalog_keeps_its_type_and_what_was_carried_to_it(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    """Night 2 seeds every book page from night 1's results, not from a link: a changed book page is extracted
    again as a book (the rule that led there is in its task), with the fields its card carried."""
    pipeline.spec(typed_spec(books_spec, site.base_url))
    pipeline.run(CRAWL)
    changed = site.set_catalogue(books=BOOKS, version=1, changed_fraction=0.1).changed_ids
    assert changed
    second = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, second)
    assert summary["pages"]["fetched"] >= len(changed)  # the changed books' pages answered 200, not 304
    assert summary["types"]["book"]["records"] == BOOKS
    assert summary["verdict"]["healthy"], summary["verdict"]["alerts"]
    books = [r for r in pipeline.records(CRAWL, second) if r["_type"] == "book"]
    assert len(books) == BOOKS
    assert all(b["price"] is not None and b["rating"] is not None for b in books)


def test_a_stranded_claim_is_sent_again_with_its_rule_and_carried_fields(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    """The sweep re-sends a claim nobody sent: the claim keeps the rule and the carried data its link had."""
    spec = typed_spec(books_spec, site.base_url)
    spec["seeds"]["range"]["stop"] = 1  # one listing page
    pipeline.spec(spec)
    run_id = pipeline.start(CRAWL)
    page_1 = f"{site.base_url}/catalogue/page-1.html"
    book = site.catalogue.detail_path(site.catalogue.books[-1])  # on the last listing page: not found from page 1
    stranded = UrlTask(
        url=f"{site.base_url}{book}",
        depth=1,
        origin="link",
        parent=parent_id(page_1),
        via="books",
        carry={"price": 12.5, "rating": "Five"},
    )
    run = pipeline.run_state(CRAWL, run_id)
    assert pipeline.services.frontier.claim(run_id, [stranded], seeds=run.seeds, max_pages=500).won == [stranded]
    pipeline.drain()
    assert pipeline.sweep() == []  # counts it, not drained
    assert pipeline.sweep() == []  # stalled: the waiting link is sent again
    pipeline.drain()
    assert [f["run_id"] for f in pipeline.sweep()] == [run_id]

    records = [r for r in pipeline.records(CRAWL, run_id) if r["_key"] == stranded.url]
    assert [(r["_type"], r["price"], r["rating"]) for r in records] == [("book", 12.5, "Five")]


def test_the_records_table_keeps_each_types_record_of_a_shared_key(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    spec = typed_spec(books_spec, site.base_url)
    spec["output"] = {"records_table": True}
    pipeline.spec(spec)
    run_id = pipeline.run(CRAWL)
    table = pipeline.services.records
    assert table is not None
    book = next(r for r in pipeline.records(CRAWL, run_id) if r["_type"] == "book")
    card = table.get(CRAWL, book["_key"], "listing")
    page = table.get(CRAWL, book["_key"], "book")
    assert card is not None
    assert page is not None
    assert (card["record_type"], page["record_type"]) == ("listing", "book")
    assert json.loads(str(page["data"]))["name"] == book["name"]
    assert "name" not in json.loads(str(card["data"]))
    assert table.get(CRAWL, book["_key"]) is None  # no untyped item: keys live within their type


@pytest.mark.parametrize("batch_size", [10, 1], ids=["listing-in-the-batch", "listing-in-an-earlier-batch"])
def test_a_value_that_changed_on_the_listing_reaches_the_book_seeded_from_the_catalog(
    pipeline: Any,
    site: RunningDemoSite,
    books_spec: Any,
    logs: Any,
    batch_size: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Night 2 seeds every book page from night 1 with night 1's carried price; a listing extracted again on
    night 2 carries the new price, and the book takes it: the listing's message is sent first, and the book
    reads what it carried, from the batch (batches of 10) or from its result (batches of one message)."""
    spec = typed_spec(books_spec, site.base_url)
    pipeline.spec(spec)
    first = pipeline.run(CRAWL)
    changed = site.set_catalogue(books=BOOKS, version=1, changed_fraction=0.1).changed_ids
    frontier = pipeline.services.frontier
    read_back: list[int] = []
    real = frontier.by_prefix

    def by_prefix(run_id: str, prefixes: Any) -> Any:
        found = real(run_id, prefixes)
        read_back.append(sum(1 for e in found.values() if e.result is not None and e.result.kids))
        return found

    monkeypatch.setattr(frontier, "by_prefix", by_prefix)
    second = pipeline.start(CRAWL)
    pipeline.drain(batch_size)
    pipeline.finalize()
    assert pipeline.run_state(CRAWL, second).status == "finished"
    if batch_size == 1:
        assert sum(read_back) > 0  # books in later batches read their listing's result back
    records = pipeline.records(CRAWL, second)
    cards = {r["url"]: r for r in records if r["_type"] == "listing"}
    books = [r for r in records if r["_type"] == "book"]
    assert len(books) == BOOKS
    before = {r["url"]: r["price"] for r in pipeline.records(CRAWL, first) if r["_type"] == "listing"}
    repriced = {url for url, card in cards.items() if card["price"] != before[url]}
    assert len(repriced) == len(changed)
    assert [b["url"] for b in books if b["price"] != cards[b["url"]]["price"]] == []
    assert len(logs.named("carried data refreshed")) >= 1
    # The book's record changed with its card's price: counted as changed, and the next run carries it.
    assert pipeline.summary(CRAWL, second)["types"]["book"]["changed"] == len(changed)
    third = pipeline.run(CRAWL)
    again = {r["url"]: r["price"] for r in pipeline.records(CRAWL, third) if r["_type"] == "book"}
    assert again == {b["url"]: b["price"] for b in books}

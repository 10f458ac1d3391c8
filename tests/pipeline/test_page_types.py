"""A spec with several page types: each type's records, keyed per type, in its own output, with carried fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sluice.domain.layout import part_key, records_prefix
from sluice.domain.pages import PageResult, PartBlock
from sluice.domain.summary import RunSummary
from sluice.messages import UrlTask
from sluice.pipeline.visit.carried import MapCache, by_link, refresh
from sluice.pipeline.visit.links import parent_id
from sluice.pipeline.visit.page_results import RecordsPart
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.ops.query import crawl_tables, run_query
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text

from .conftest import BOOKS, PAGES, Logs, Pipeline, SpecData, local_harness

CRAWL = "typed-books"


def typed_spec(books_spec: SpecData, base_url: str) -> dict[str, Any]:
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
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
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


def test_a_second_run_of_a_typed_spec_reuses_each_types_records(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(typed_spec(books_spec, site.base_url))
    first = pipeline.run(CRAWL)
    second = pipeline.run(CRAWL)  # nothing changed: 304s, every record reused from the first run's files
    before = sorted((r["_type"], r["_key"], r["price"]) for r in pipeline.records(CRAWL, first))
    after = sorted((r["_type"], r["_key"], r["price"]) for r in pipeline.records(CRAWL, second))
    assert after == before
    assert pipeline.summary(CRAWL, second)["records"]["duplicates_dropped"] == 0


def test_sluice_query_reads_every_types_records_with_their_type(
    site: RunningDemoSite, books_spec: SpecData, tmp_path: Path
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
    # Written out, not derived from columns.py: the record's own three, the type's fields, then what its
    # links carry to it that it does not have (a book's price, a number), then the partitions.
    expected = {
        "listing": ["_key", "_page", "_type", "title", "url", "price", "rating", "crawl", "run"],
        "book": ["_key", "_page", "_type", "name", "url", "rating", "price", "crawl", "run"],
    }
    for kind, names in expected.items():
        _, described = run_query(f"DESCRIBE typed_books__{kind}", tables)
        assert [(row[0], row[1]) for row in described] == [(n, "DOUBLE" if n == "price" else "VARCHAR") for n in names]
    sql = f"SELECT count(*), count(price), min(price) > 0 FROM typed_books__book WHERE run = '{run_id}'"  # noqa: S608
    assert run_query(sql, tables)[1] == [(BOOKS, BOOKS, True)]


def test_each_type_is_counted_and_judged_on_its_own(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
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
        "carry_stale": 0,
        "carry_dropped": {},
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
        "carry_stale": 0,
        "carry_dropped": {},
    }
    assert summary["types"]["listing"]["record_count_ratio"] == 1.0
    stored = RunSummary.from_json(summary)
    text = as_text(LocalRun(CRAWL, second, stored, [], {"records": "records/", "summary": "summary.json"}))
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
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
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
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
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
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
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
    pipeline: Pipeline,
    site: RunningDemoSite,
    books_spec: SpecData,
    logs: Logs,
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
        read_back.append(sum(1 for e in found.values() if e.result is not None and e.result.carried_by_link))
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
    # The book's record changed with its card's price: counted as changed, and the next run reuses it.
    assert pipeline.summary(CRAWL, second)["types"]["book"]["changed"] == len(changed)
    third = pipeline.run(CRAWL)
    again = {r["url"]: r["price"] for r in pipeline.records(CRAWL, third) if r["_type"] == "book"}
    assert again == {b["url"]: b["price"] for b in books}


LINKS = 60
"""Each card carrying a 400-character note with its price: about twice the links main kept of such a listing
(16 KB), and quick on moto; the test after it takes 10,000 through the same read on each store."""


def carry_spec(base_url: str, n: int, *, pad: int = 0, crawl: str = "carry-many") -> dict[str, Any]:
    """One listing of ``n`` cards, each linking to an item page and carrying its price (and its note)."""
    carry = ["note", "price"] if pad else ["price"]
    return {
        "name": crawl,
        "seeds": [f"{base_url}/_test/carry-list/{crawl}?n={n}&pad={pad}"],
        "follow": {"max_depth": 1, "max_pages": n + 10},
        "types": {
            "listing": {
                "pages": "/_test/carry-list/",
                "extract": {
                    "item": "li.card",
                    "fields": {
                        "url": {"selector": "a::attr(href)", "process": ["absolute_url"], "required": True},
                        "price": "span.price::text",
                        "note": "span.note::text",
                    },
                    "key": ["url"],
                },
                "follow": {"items": {"selectors": ["li.card a"], "carry": carry}},
            },
            "item": {
                "via": ["items"],
                "extract": {"fields": {"name": "h2.item::text", "url": "::page_url"}, "key": ["url"]},
            },
        },
        "politeness": {"concurrency": 32, "concurrency_per_domain": 32, "timeout_seconds": 10, "obey_robots": False},
        "alerts": {"record_count_floor": 0.5, "fail_when_carry_lost": True},
    }


def test_every_link_of_a_long_listing_carries_its_new_price_on_the_second_night(
    pipeline: Pipeline, site: RunningDemoSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Night 1: a listing links to 60 item pages, each carrying its price. Night 2: every price rises by 100,
    and every item page seeded from the catalog takes its new price (main kept what fit its 16 KB, about 35
    links here, 299 of 10,000 with a bare price, and left the rest with night 1's price, counted unchanged,
    the run healthy). The listing's map is in its batch's part;
    the items' batches read it there, one ranged GET a listing and container."""
    data = carry_spec(site.base_url, LINKS, pad=400)
    pipeline.spec(data)
    first = pipeline.run("carry-many")
    assert pipeline.summary("carry-many", first)["types"]["item"]["pages"] == LINKS
    httpx.get(f"{site.base_url}/_test/carry-bump/carry-many")
    ranged: list[int] = []
    real = pipeline.services.objects.get_range

    def get_range(key: str, start: int, length: int) -> bytes:
        ranged.append(length)
        return bytes(real(key, start, length))

    monkeypatch.setattr(pipeline.services.objects, "get_range", get_range)

    second = pipeline.start("carry-many")
    pipeline.drain(1)  # a message a batch: the items' batches come after the listing's, and read its map back
    pipeline.finalize()

    items = [r for r in pipeline.records("carry-many", second) if r["_type"] == "item"]
    assert len(items) == LINKS
    wrong = [r["url"] for r in items if int(r["price"]) != int(r["url"].rsplit("/", 1)[1]) + 100]
    assert wrong == []
    summary = pipeline.summary("carry-many", second)
    assert summary["types"]["item"]["changed"] == LINKS
    assert (summary["types"]["item"]["carry_stale"], summary["pages"]["carry_stale"]) == (0, 0)
    assert summary["verdict"]["healthy"] is True, summary["verdict"]["alerts"]
    (listing,) = pipeline.services.frontier.by_prefix(second, [parent_id(data["seeds"][0])]).values()
    assert listing.result is not None
    assert listing.result.carried_by_link is None  # too large for the result: in the part, pointed at
    assert listing.result.carried_block is not None
    assert listing.result.carried_block.length in ranged  # the items' batches read the listing's map from its part


def test_ten_thousand_links_of_one_listing_reach_every_page_they_carry_to(pipeline: Pipeline) -> None:
    """The read the second night's pages make, at 10,000 links, on each adapter set's store: a listing's result
    written with its map in the part, then every page it links to refreshed from it."""
    services = pipeline.services
    run_id = "20260101T000000Z-carry"
    listing_url = "http://127.0.0.1:1/_test/carry-list/k?n=10000"
    links = [f"http://127.0.0.1:1/_test/carry-item/{i}" for i in range(10_000)]
    carried_by_link = by_link({link: {"price": i + 100} for i, link in enumerate(links)})
    part = RecordsPart(part_key("carry-many", run_id, "p1"))
    result = part.add_records(PageResult(listing_url, 0, "seed", "fetched", carried_by_link=carried_by_link), [])
    assert (result.carried_by_link, result.carried_block) == (None, PartBlock("p1", 0, len(part.body) - 1))
    services.objects.put(part.key, bytes(part.body), "application/x-ndjson")
    assert services.frontier.complete(run_id, [result]) == [True]
    tasks = [
        UrlTask(url=link, depth=0, origin="seed", parent=parent_id(listing_url), carry={"price": i}, via="items")
        for i, link in enumerate(links)
    ]

    got = refresh(services, "carry-many", run_id, tasks, {}, MapCache())

    assert (got.refreshed, got.stale) == (10_000, {})
    assert [t.carry for t in got.tasks] == [{"price": i + 100} for i in range(10_000)]


def test_pages_whose_linking_page_cannot_give_this_nights_data_are_counted_stale_and_can_fail_the_run(
    pipeline: Pipeline, site: RunningDemoSite, logs: Logs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's map that cannot be read back (here: its part is not where its result says) leaves its pages with
    night 1's carried data: each is counted (carry_stale, per type, in the summary) and the verdict's check says
    so, unhealthy as the spec asks (main counted them unchanged, the run healthy)."""
    data = carry_spec(site.base_url, 20, pad=1000, crawl="carry-stale")  # 20 notes of 1 KB: the map is in the part
    pipeline.spec(data)
    first = pipeline.run("carry-stale")
    before = {r["url"]: r["price"] for r in pipeline.records("carry-stale", first) if r["_type"] == "item"}
    httpx.get(f"{site.base_url}/_test/carry-bump/carry-stale")
    monkeypatch.setattr("sluice.pipeline.visit.carried.part_key", lambda crawl, run, part: f"work/{crawl}/gone/{part}")

    second = pipeline.start("carry-stale")
    pipeline.drain(1)  # a message a batch: the items' batches come after the listing's, and read its result
    pipeline.finalize()

    items = {r["url"]: r["price"] for r in pipeline.records("carry-stale", second) if r["_type"] == "item"}
    assert items == before  # night 1's prices stand: nothing newer could be had
    summary = pipeline.summary("carry-stale", second)
    assert (summary["types"]["item"]["carry_stale"], summary["pages"]["carry_stale"]) == (20, 20)
    check = {c["check"]: c for c in summary["verdict"]["checks"]}["carry_stale"]
    assert check["ok"] is False
    assert "20 page(s) kept the last run's carried data" in check["message"]
    assert summary["verdict"]["healthy"] is False
    assert logs.named("carried data unreadable")


def test_a_carried_field_over_the_links_bound_is_left_out_alone_and_counted(
    pipeline: Pipeline, site: RunningDemoSite, logs: Logs
) -> None:
    """A 3,000-character note carried with each card's price: the note is over the 2 KB a link's data holds, so it
    is left out and counted per field (carry_dropped), and the price still travels (main dropped both)."""
    pipeline.spec(carry_spec(site.base_url, 3, pad=3000, crawl="carry-big"))
    run_id = pipeline.run("carry-big")

    items = [r for r in pipeline.records("carry-big", run_id) if r["_type"] == "item"]
    assert sorted((int(r["price"]), r.get("note")) for r in items) == [(0, None), (1, None), (2, None)]
    summary = pipeline.summary("carry-big", run_id)
    assert summary["types"]["listing"]["carry_dropped"] == {"note": 3}
    assert summary["records"]["carry_dropped"] == {"note": 3}
    check = {c["check"]: c for c in summary["verdict"]["checks"]}["carry_dropped"]
    assert (check["ok"], summary["verdict"]["healthy"]) == (False, False)
    assert "by field: note 3" in check["message"]
    (line,) = logs.named("carried fields dropped")
    assert line["fields"] == {"note": 3}

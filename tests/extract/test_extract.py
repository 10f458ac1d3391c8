"""Page extraction on Books-to-Scrape markup: fields, records, keys, counts and follow links."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from sluice.extraction.extract import PageExtraction, Record, content_hash, extract_page, extractor_for, record_line
from sluice.spec import CrawlSpec
from sluice_tools.demosite.catalogue import Catalogue

PAGE_URL = "https://books.toscrape.com/catalogue/category/books_1/page-1.html"
ITEM = "article.product_pod"

MakeSpec = Callable[..., CrawlSpec]
Pod = Callable[..., str]
Listing = Callable[..., str]


def fields_spec(make_spec: MakeSpec, fields: dict[str, Any], **extract: Any) -> CrawlSpec:
    """The books spec with its extract section replaced by ``fields`` (and item, key, pages)."""
    return make_spec(extract={"item": ITEM, "fields": fields, **extract})


def test_books_listing_page(spec: CrawlSpec, page: str) -> None:
    result = extract_page(spec, PAGE_URL, page)
    assert (result.items, len(result.records)) == (20, 20)
    first = result.records[0]
    url = "https://books.toscrape.com/a-light-in-the-attic-1_999/index.html"
    assert first == Record(
        key=url,
        data={"title": "A Light in the Attic 1", "url": url, "price": 11.01, "rating": "Two", "in_stock": "In stock"},
        page_url=PAGE_URL,
        position=0,
    )
    assert [r.position for r in result.records] == list(range(20))
    assert result.links == ["https://books.toscrape.com/catalogue/category/books_1/page-2.html"]
    assert result.out_of_scope == 0
    assert result.rejected == {"title": 0, "url": 0, "price": 0}
    assert result.missing == {"title": 0, "url": 0, "price": 0, "rating": 0, "in_stock": 0}
    assert result.base_url == PAGE_URL


def test_page_is_parsed_once(spec: CrawlSpec, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[int] = []

    def counting(html: str) -> LexborHTMLParser:
        parses.append(len(html))
        return LexborHTMLParser(html)

    monkeypatch.setattr("sluice.extraction.extract.LexborHTMLParser", counting)
    extract_page(spec, PAGE_URL, page)
    assert parses == [len(page)]


def test_selector_dialect(make_spec: MakeSpec, listing: Listing) -> None:
    card = (
        '<article class="product_pod" data-id="7">Own <b>bold</b> tail'
        '<p class="price_color" data-currency="GBP">£51.77 <span>incl. VAT</span></p></article>'
    )
    fields = {
        "own": "p.price_color::text",
        "deep": "p.price_color ::text",
        "plain": "p.price_color",
        "attr": "p.price_color::attr(data-currency)",
        "absent_attr": "p.price_color::attr(data-nothing)",
        "html": {"selector": "p.price_color span::html", "process": []},
        "item_attr": "::attr(data-id)",
        "item_own": "::text",
        "item_deep": " ::text",
    }
    record = extract_page(fields_spec(make_spec, fields), PAGE_URL, listing([card])).records[0]
    assert record.data == {
        "own": "£51.77",
        "deep": "£51.77 incl. VAT",
        "plain": "£51.77 incl. VAT",
        "attr": "GBP",
        "absent_attr": None,
        "html": "<span>incl. VAT</span>",
        "item_attr": "7",
        "item_own": "Own  tail",
        "item_deep": "Own bold tail£51.77 incl. VAT",
    }


def test_required_fields_reject_records_counted_per_field(spec: CrawlSpec, pod: Pod, listing: Listing) -> None:
    no_price = pod(2).replace('<p class="price_color">£12.02</p>', "")
    no_title = pod(4).replace(' title="A Light in the Attic 4"', "")
    neither = pod(5).replace(' title="A Light in the Attic 5"', "").replace("£15.05", "£")
    pods = [pod(1), no_price, pod(3, price="£thirty"), no_title, neither, pod(6)]
    result = extract_page(spec, PAGE_URL, listing(pods))
    assert result.items == 6
    assert [r.data["title"] for r in result.records] == ["A Light in the Attic 1", "A Light in the Attic 6"]
    assert [r.position for r in result.records] == [0, 5]
    assert result.rejected == {"title": 2, "url": 0, "price": 3}
    assert result.missing == {"title": 2, "url": 0, "price": 3, "rating": 0, "in_stock": 0}


def test_null_counts_for_optional_fields(spec: CrawlSpec, pod: Pod, listing: Listing) -> None:
    no_rating = pod(1).replace('class="star-rating Two"', 'class="stars"')
    odd_rating = pod(2).replace('class="star-rating Three"', 'class="star-rating"')
    no_stock = pod(3).replace("In stock", "  ")
    result = extract_page(spec, PAGE_URL, listing([no_rating, odd_rating, no_stock, pod(4)]))
    assert len(result.records) == 4
    assert result.missing == {"title": 0, "url": 0, "price": 0, "rating": 2, "in_stock": 1}
    assert result.rejected == {"title": 0, "url": 0, "price": 0}
    assert [r.data["rating"] for r in result.records] == [None, None, "Four", "Five"]
    assert result.records[2].data["in_stock"] is None


def test_many_fields(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    fields = {
        "title": "h3 a::attr(title)",
        "icons": {"selector": "p.star-rating i::attr(class)", "many": True},
        "links": {"selector": "a::attr(href)", "many": True, "process": ["absolute_url"]},
        "badges": {"selector": "span.badge::text", "many": True},
    }
    unstarred = pod(2).replace('<i class="icon-star"></i>', "")
    badge = pod(3).replace("<h3>", '<span class="badge"> New </span><span class="badge"> </span><h3>')
    result = extract_page(fields_spec(make_spec, fields), PAGE_URL, listing([pod(1), unstarred, badge]))
    first, second, third = (r.data for r in result.records)
    assert first["icons"] == ["icon-star"] * 5
    url = "https://books.toscrape.com/a-light-in-the-attic-1_999/index.html"
    assert first["links"] == [url, url]
    # A list field with no values is an empty list, never null; it still counts as missing.
    assert (first["badges"], second["icons"], third["badges"]) == ([], [], ["New"])
    assert result.missing == {"title": 0, "icons": 1, "links": 0, "badges": 2}


def test_a_required_list_field_with_no_values_drops_its_record(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    fields = {"title": "h3 a::attr(title)", "badges": {"selector": "span.badge::text", "many": True, "required": True}}
    badge = pod(3).replace("<h3>", '<span class="badge">New</span><h3>')
    result = extract_page(fields_spec(make_spec, fields), PAGE_URL, listing([pod(1), badge]))
    assert [r.data["badges"] for r in result.records] == [["New"]]
    assert result.rejected == {"badges": 1}


def test_a_field_can_take_the_pages_own_url(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    fields = {
        "title": "h3 a::attr(title)",
        "found_on": "::page_url",
        "pages": {"selector": "::page_url", "many": True},
        "host": {"selector": "::page_url", "process": [{"regex": "//([^/]+)/"}]},
    }
    result = extract_page(fields_spec(make_spec, fields), PAGE_URL, listing([pod(1), pod(2)]))
    assert [r.data["found_on"] for r in result.records] == [PAGE_URL, PAGE_URL]
    assert result.records[0].data["pages"] == [PAGE_URL]
    assert result.records[0].data["host"] == "books.toscrape.com"


def test_records_whose_key_fell_back_are_counted(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    """With extract.key, a record missing a key field falls back to its url field, then its position."""
    no_upc = {"title": "h3 a::attr(title)", "upc": "span.upc::text", "url": "h3 a::attr(href)"}
    upc = pod(2).replace("<h3>", '<span class="upc">u2</span><h3>')
    result = extract_page(fields_spec(make_spec, no_upc, key=["upc"]), PAGE_URL, listing([pod(1), upc]))
    assert [(r.key, r.key_fallback) for r in result.records] == [
        ("../../../a-light-in-the-attic-1_999/index.html", True),
        ("u2", False),
    ]
    assert result.fallback_keys == 1

    # Without extract.key the url field is the key by rule; only the page-and-position key is a fallback.
    by_url = extract_page(fields_spec(make_spec, no_upc), PAGE_URL, listing([pod(1)]))
    assert (by_url.records[0].key_fallback, by_url.fallback_keys) == (False, 0)
    positional = extract_page(fields_spec(make_spec, {"title": "h3 a::attr(title)"}), PAGE_URL, listing([pod(1)]))
    assert positional.records[0].key == f"{PAGE_URL}#0"
    assert positional.fallback_keys == 1


def test_key_from_key_fields(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    fields = {
        "title": "h3 a::attr(title)",
        "price": {"selector": "p.price_color::text", "process": ["price"]},
        "url": {"selector": "h3 a::attr(href)", "process": ["absolute_url"]},
    }
    spec = fields_spec(make_spec, fields, key=["title", "price"])
    result = extract_page(spec, PAGE_URL, listing([pod(1), pod(2, price="Sold out")]))
    assert result.records[0].key == "A Light in the Attic 1|11.01"
    # A missing key field falls back to the url field.
    assert result.records[1].key == "https://books.toscrape.com/a-light-in-the-attic-2_998/index.html"


def test_key_falls_back_to_page_and_position(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    spec = fields_spec(make_spec, {"title": "h3 a::attr(title)", "upc": "td.upc"}, key=["upc"])
    url = "https://Books.ToScrape.com:443/catalogue/category/books_1/page-1.html?b=2&a=1#top"
    result = extract_page(spec, url, listing([pod(1), pod(2)]))
    canonical = "https://books.toscrape.com/catalogue/category/books_1/page-1.html?a=1&b=2"
    assert [r.key for r in result.records] == [f"{canonical}#0", f"{canonical}#1"]
    assert result.records[0].page_url == url


def test_key_defaults_to_url_field(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    fields = {"title": "h3 a::attr(title)", "url": {"selector": "h3 a::attr(href)", "process": ["absolute_url"]}}
    record = extract_page(fields_spec(make_spec, fields), PAGE_URL, listing([pod(1)])).records[0]
    assert record.key == record.data["url"] == "https://books.toscrape.com/a-light-in-the-attic-1_999/index.html"


def test_content_hash() -> None:
    record = Record("k", {"title": "Café", "price": 51.77}, PAGE_URL, 0)
    same = Record("other", {"price": 51.77, "title": "Café"}, "https://x.example/", 3)
    changed = Record("k", {"title": "Café", "price": 51.78}, PAGE_URL, 0)
    assert record.content_hash == same.content_hash == content_hash({"title": "Café", "price": 51.77})
    assert record.content_hash != changed.content_hash
    assert len(record.content_hash) == 32
    assert int(record.content_hash, 16) >= 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.key = "changed"  # type: ignore[misc]


def test_content_hash_is_the_value_earlier_runs_stored() -> None:
    """Catalogs keep each record's hash and the next run compares with it: the value is fixed for good."""
    data = {"title": "Café", "price": 51.77, "tags": ["a", None], "when": None, "n": 3, "bad": "\ud800"}
    assert content_hash(data) == "f4818f2439d4d73800abc474a78cc300"
    record = Record("k", {"title": "Café", "price": 51.77, "z": [1, {"b": 2, "a": 1}]}, "http://p/", 0, type="book")
    line = '{"_key": "k", "_page": "http://p/", "_type": "book", "title": "Café", "price": 51.77, '
    line += '"z": [1, {"b": 2, "a": 1}]}'
    assert record_line(record) == line + "\n"


def test_a_record_with_other_data_has_its_own_content_hash() -> None:
    record = Record("k", {"title": "Café"}, PAGE_URL, 0)
    first = record.content_hash
    other = dataclasses.replace(record, data={"title": "Tea"})
    assert other.content_hash == content_hash({"title": "Tea"}) != first
    assert record.content_hash == first
    assert record == Record("k", {"title": "Café"}, PAGE_URL, 0)  # the remembered hash is no part of equality


def test_links_resolved_canonical_deduplicated_and_scoped(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    follow = {
        "selectors": ["li.next a", "ul.pager", "link[rel=next]", "div.more a"],
        "allowed_domains": ["toscrape.com"],
        "deny": [r"/login"],
    }
    spec = make_spec(follow=follow)
    more = """<div class="more">
        <a href="page-2.html#top">again</a>
        <a href="/catalogue/page-3.html?b=2&amp;a=1">three</a>
        <a href="https://quotes.toscrape.com/">quotes (a subdomain)</a>
        <a href="https://other.example/">elsewhere</a>
        <a href="https://OTHER.example:443/#x">elsewhere again</a>
        <a href="/login?next=/">log in</a>
        <a href="javascript:void(0)">js</a>
        <a href="mailto:books@toscrape.com">mail</a>
        <a href="tel:+441234">phone</a>
        <a>no href</a>
        <a href="">empty</a>
    </div>"""
    html = listing([pod(1), more], head_extra='\n<link rel="next" href="page-2.html?">')
    result = extract_page(spec, PAGE_URL, html)
    assert result.links == [
        "https://books.toscrape.com/catalogue/category/books_1/page-2.html",
        "https://books.toscrape.com/catalogue/page-3.html?a=1&b=2",
        "https://quotes.toscrape.com/",
    ]
    assert result.out_of_scope == 2


def test_base_href(spec: CrawlSpec, pod: Pod, listing: Listing) -> None:
    html = listing([pod(1)], head_extra='\n<base href="https://books.toscrape.com/catalogue/mirror/x/y/">')
    result = extract_page(spec, PAGE_URL, html)
    assert result.base_url == "https://books.toscrape.com/catalogue/mirror/x/y/"
    assert result.links == ["https://books.toscrape.com/catalogue/mirror/x/y/page-2.html"]
    assert result.records[0].data["url"] == "https://books.toscrape.com/catalogue/a-light-in-the-attic-1_999/index.html"


def test_base_href_relative_and_unusable(spec: CrawlSpec, pod: Pod, listing: Listing) -> None:
    relative = extract_page(spec, PAGE_URL, listing([pod(1)], head_extra='<base target="_blank"><base href="/c/">'))
    assert relative.base_url == "https://books.toscrape.com/c/"
    unusable = extract_page(spec, PAGE_URL, listing([pod(1)], head_extra='<base href="javascript:x()">'))
    assert unusable.base_url == PAGE_URL


def test_links_out_of_scope(make_spec: MakeSpec, pod: Pod, listing: Listing) -> None:
    spec = make_spec(
        seeds=["https://quotes.toscrape.com/"],  # a seed is in scope (the spec refuses one that is not)
        follow={"selectors": ["li.next a"], "allowed_domains": ["quotes.toscrape.com"]},
    )
    result = extract_page(spec, PAGE_URL, listing([pod(1)]))
    assert (result.links, result.out_of_scope) == ([], 1)


def test_no_follow_selectors_no_links(make_spec: MakeSpec, page: str) -> None:
    assert extract_page(make_spec(follow={}), PAGE_URL, page).links == []


def test_pages_pattern_limits_records_not_links(make_spec: MakeSpec, spec_data: dict[str, Any], page: str) -> None:
    extract = {**spec_data["extract"], "pages": r"/catalogue/[^/]+_\d+/index\.html$"}
    result = extract_page(make_spec(extract=extract), PAGE_URL, page)
    assert (result.records, result.items) == ([], 0)
    assert result.links == ["https://books.toscrape.com/catalogue/category/books_1/page-2.html"]
    assert result.missing == {"title": 0, "url": 0, "price": 0, "rating": 0, "in_stock": 0}
    matching = extract_page(make_spec(extract=extract), "https://books.toscrape.com/catalogue/x_1/index.html", page)
    assert len(matching.records) == 20


def test_whole_document_is_one_item(make_spec: MakeSpec) -> None:
    fields = {
        "title": {"selector": "div.product_main h1::text", "required": True},
        "price": {"selector": "p.price_color::text", "process": ["price"]},
        "upc": "table tr:first-child td",
        "description": {"selector": "#product_description + p", "process": ["collapse_whitespace"]},
    }
    spec = make_spec(extract={"fields": fields, "key": ["upc"]})
    html = """<html><body><div class="product_main"><h1>A Light in the Attic</h1>
        <p class="price_color">£51.77</p></div>
        <div id="product_description"><h2>Product Description</h2></div>
        <p>It's hard to imagine   a world
        without A Light in the Attic.</p>
        <table class="table table-striped"><tr><th>UPC</th><td>a897fe39b1053632</td></tr></table>
        </body></html>"""
    url = "https://books.toscrape.com/catalogue/a-light-in-the-attic_1000/index.html"
    result = extract_page(spec, url, html)
    assert result.items == 1
    assert result.records == [
        Record(
            "a897fe39b1053632",
            {
                "title": "A Light in the Attic",
                "price": 51.77,
                "upc": "a897fe39b1053632",
                "description": "It's hard to imagine a world without A Light in the Attic.",
            },
            url,
            0,
        )
    ]


BROKEN = """<html><head><title>Broken page</title>
<body>
<div class="page"><ol class="row">
<li><article class="product_pod"><h3><a href="unclosed-card_1/index.html" title="Unclosed Card">Unclosed Card</a></h3>
<div class="product_price"><p class="price_color">£10.00<p class="instock availability">In stock</div></article>
</div></div></span></td>
<li><article class="product_pod"><h3><a href="no-price_2/index.html" title="No Price">No Price</a></h3></article>
<li><article class="product_pod"><div class="product_price"><p class="price_color">£20.00</p></div></article>
<li><article class="product_pod"><h3><a title="No Href">No Href</a></h3><p class="price_color">£thirty</p>
</ol><p>Unclosed paragraph <b>bold <i>both
<li class="next"><a href="page-2.html">next
</div>
</body>
"""


def test_broken_html(spec: CrawlSpec) -> None:
    result = extract_page(spec, PAGE_URL, BROKEN)
    assert result.items == 4
    assert [(r.data["title"], r.data["price"], r.data["in_stock"]) for r in result.records] == [
        ("Unclosed Card", 10.0, "In stock")
    ]
    assert result.rejected == {"title": 1, "url": 2, "price": 2}
    assert result.links == ["https://books.toscrape.com/catalogue/category/books_1/page-2.html"]


def test_unclosed_title_swallows_the_page(spec: CrawlSpec) -> None:
    # As in a browser: <title> holds raw text up to </title>, so nothing after it is markup.
    result = extract_page(spec, PAGE_URL, BROKEN.replace("</title>", ""))
    assert (result.items, result.records, result.links) == (0, [], [])


@pytest.mark.parametrize("html", ["", "   \n", "<html>", "</div></p>", "<<<>>>", "\x00", "<p>\ud800</p>"])
def test_empty_and_garbage_documents(spec: CrawlSpec, make_spec: MakeSpec, html: str) -> None:
    result = extract_page(spec, PAGE_URL, html)
    assert spec.extract is not None
    assert result == PageExtraction(
        [], [], 0, 0, {"title": 0, "url": 0, "price": 0}, {k: 0 for k in spec.extract.fields}, PAGE_URL
    )
    whole = make_spec(extract={"fields": {"title": {"selector": "h1", "required": True}, "body": " ::text"}})
    one = extract_page(whole, PAGE_URL, html)
    assert (one.items, one.records, one.rejected) == (1, [], {"title": 1})


def test_extractor_compiled_once_per_spec(spec: CrawlSpec, make_spec: MakeSpec) -> None:
    assert extractor_for(spec) is extractor_for(spec)
    assert extractor_for(spec) is not extractor_for(make_spec())


def nested_comments(depth: int, replies: bool = False) -> str:
    """Comments nested ``depth`` deep, each with an author, text and sometimes a score; with
    ``replies``, each comment's reply sits in a ``<div class="replies">`` (not a direct child)."""
    html = ""
    for n in reversed(range(depth)):
        score = f'<span class="score">{n}</span>' if n % 3 else ""
        inner = f'<div class="replies">{html}</div>' if replies and html else html
        html = f'<div class="comment"><b class="author">user{n}</b>{score}<p>text {n}</p>{inner}</div>'
    return f"<html><body><section>{html}</section></body></html>"


@pytest.mark.parametrize("page_kind", ["listing", "flawed listing", "nested", "nested in replies", "crowded listing"])
def test_page_wide_and_per_item_selection_agree(
    make_spec: MakeSpec, pod: Pod, listing: Listing, page_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if page_kind.startswith("nested"):
        fields = {
            "author": {"selector": "b.author::text", "required": True},
            "score": {"selector": "span.score", "process": ["int"]},
            "text": "p",
            "outer": "section > div.comment > b.author",
        }
        spec = make_spec(extract={"item": "div.comment", "fields": fields})
        html = nested_comments(12, replies=page_kind == "nested in replies")
    elif page_kind == "crowded listing":  # 400 KB, ~230 tags a card: queried card by card unless forced
        spec = make_spec()
        html = Catalogue(books=100, heavy=True).get("/catalogue/page-2.html").body  # type: ignore[union-attr,assignment]
    else:
        spec = make_spec()
        pods = [pod(n) for n in range(1, 16)]
        if page_kind == "flawed listing":
            pods[3] = pods[3].replace('<p class="price_color">', '<p class="price">')
            pods[7] = pods[7].replace("<h3>", "<h4>").replace("</h3>", "</h4>")
            pods[9] = pods[9].replace('class="star-rating Five"', "")
        html = listing(pods)
    monkeypatch.setattr("sluice.extraction.extract._PAGE_WIDE_MIN_ITEMS", 1)
    monkeypatch.setattr("sluice.extraction.extract._PAGE_WIDE_MAX_TAGS", 10**9)
    page_wide = extract_page(spec, PAGE_URL, html)
    monkeypatch.setattr("sluice.extraction.extract._PAGE_WIDE_MIN_ITEMS", 10**9)
    per_item = extract_page(spec, PAGE_URL, html)
    assert page_wide == per_item
    assert page_wide.items >= 12


@pytest.mark.parametrize("item", ["div.comment", "section > div.comment, div.comment div.comment"])
@pytest.mark.parametrize("replies", [False, True])
def test_nested_items_take_their_own_and_inner_fields(make_spec: MakeSpec, item: str, replies: bool) -> None:
    fields = {"author": "b.author::text", "score": {"selector": "span.score", "process": ["int"]}}
    spec = make_spec(extract={"item": item, "fields": fields})
    records = extract_page(spec, PAGE_URL, nested_comments(12, replies)).records
    assert [r.data["author"] for r in records] == [f"user{n}" for n in range(12)]
    # A comment without a score of its own takes the first one inside it, as item-scoped CSS does.
    assert [r.data["score"] for r in records][:4] == [1, 1, 2, 4]


def test_utf8_bytes_extract_like_the_decoded_text(spec: CrawlSpec, pod: Pod, listing: Listing) -> None:
    pods = [pod(1, title="Caf\u00e9 cr\u00e8me &amp; &eacute;clair \u2013 \u201cno\u00ebl\u201d", price="\u00a351.77")]
    pods += [pod(n) for n in range(2, 21)]
    html = listing(pods)
    from_text, from_bytes = extract_page(spec, PAGE_URL, html), extract_page(spec, PAGE_URL, html.encode())
    assert from_bytes == from_text
    assert from_bytes.records[0].data["title"] == "Caf\u00e9 cr\u00e8me & \u00e9clair \u2013 \u201cno\u00ebl\u201d"

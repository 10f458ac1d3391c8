"""Catalogue content: markup, sizes, determinism, versions and the broken selector."""

from __future__ import annotations

import html

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from sluice_tools.demosite import Catalogue

LISTING = "/catalogue/page-1.html"


def _tree(catalogue: Catalogue, path: str) -> HTMLParser:
    page = catalogue.get(path)
    assert page is not None, path
    return HTMLParser(page.body.decode("utf-8"))


def test_listing_page_has_cards_pager_and_weighs_about_50_kb() -> None:
    catalogue = Catalogue()
    page = catalogue.get(LISTING)
    assert page is not None
    assert 45_000 <= len(page.body) <= 55_000
    tree = _tree(catalogue, LISTING)
    cards = tree.css("article.product_pod")
    assert len(cards) == 20
    first = catalogue.books[0]
    link = cards[0].css_first("h3 a")
    assert link is not None
    assert link.attributes["title"] == first.title
    assert link.attributes["href"] == f"{first.slug}/index.html"
    price = cards[0].css_first("p.price_color")
    assert price is not None
    assert price.text() == first.price
    assert price.text().startswith("£")
    rating = cards[0].css_first("p.star-rating")
    assert rating is not None
    assert rating.attributes["class"] == f"star-rating {first.rating}"
    assert cards[0].css_first("p.instock.availability") is not None
    current = tree.css_first("ul.pager li.current")
    assert current is not None
    assert current.text().strip() == "Page 1 of 50"
    assert tree.css_first("ul.pager li.previous") is None
    next_link = tree.css_first("ul.pager li.next a")
    assert next_link is not None
    assert next_link.attributes["href"] == "page-2.html"


def test_middle_and_last_pages_link_correctly() -> None:
    catalogue = Catalogue(books=45, per_page=20)
    assert catalogue.pages == 3
    middle = _tree(catalogue, "/catalogue/page-2.html")
    prev_link = middle.css_first("li.previous a")
    assert prev_link is not None
    assert prev_link.attributes["href"] == "page-1.html"
    last = _tree(catalogue, "/catalogue/page-3.html")
    assert last.css_first("li.next") is None
    assert len(last.css("article.product_pod")) == 5
    assert catalogue.get("/catalogue/page-4.html") is None
    assert catalogue.get("/catalogue/page-0.html") is None
    assert catalogue.get("/catalogue/page-01.html") is None


def test_heavy_listing_weighs_about_400_kb() -> None:
    page = Catalogue(heavy=True).get(LISTING)
    assert page is not None
    assert 360_000 <= len(page.body) <= 440_000


def test_heavy_listing_carries_a_real_shops_markup() -> None:
    body = Catalogue(heavy=True).get(LISTING).body  # type: ignore[union-attr]
    assert body.count(b"<") > 4_000  # tags, not only text: what the nesting guard and lexbor pay for
    assert body.count(b"<svg") >= 80
    assert body.count(b"data-") >= 500
    tree = HTMLParser(body)
    assert len(tree.css("article.product_pod h3 a")) == 20
    assert len(tree.css("p.price_color")) == 20


def test_detail_page_matches_listing() -> None:
    catalogue = Catalogue(books=60)
    book = catalogue.books[22]
    tree = _tree(catalogue, catalogue.detail_path(book))
    main = tree.css_first("div.product_main")
    assert main is not None
    h1 = main.css_first("h1")
    assert h1 is not None
    assert h1.text() == book.title
    price = main.css_first("p.price_color")
    assert price is not None
    assert price.text() == book.price
    stock = main.css_first("p.instock.availability")
    assert stock is not None
    assert stock.text().strip() == f"In stock ({book.stock} available)"
    rows = {
        th.text(): td.text()
        for th, td in zip(tree.css("table.table-striped th"), tree.css("table.table-striped td"), strict=True)
    }
    assert rows["UPC"] == book.upc
    assert rows["Product Type"] == "Books"
    assert rows["Price (excl. tax)"] == book.price
    assert rows["Availability"] == f"In stock ({book.stock} available)"
    assert rows["Number of reviews"] == str(book.reviews)
    assert tree.css_first("#product_description") is not None
    hrefs = [a.attributes.get("href") for a in tree.css("a")]
    assert "../page-2.html" in hrefs
    assert catalogue.get(f"/catalogue/wrong-slug_{book.id}/index.html") is None


def test_titles_exercise_non_ascii_and_entities() -> None:
    catalogue = Catalogue()
    titles = [b.title for b in catalogue.books]
    assert any("é" in t or "’" in t for t in titles)
    assert any("&" in t for t in titles)
    assert all(b.slug.isascii() for b in catalogue.books)
    amp = next(b for b in catalogue.books if "&" in b.title)
    body = catalogue.get(catalogue.detail_path(amp))
    assert body is not None
    assert html.escape(amp.title).encode() in body.body


def test_same_arguments_give_same_bytes() -> None:
    one, two = Catalogue(books=80, seed=7), Catalogue(books=80, seed=7)
    for path in one.paths():
        a, b = one.get(path), two.get(path)
        assert a is not None
        assert b is not None
        assert a.body == b.body
        assert a.etag == b.etag
        assert a.last_modified == b.last_modified
    other = Catalogue(books=80, seed=8)
    assert other.get(LISTING) != one.get(LISTING)


def test_every_listed_path_renders_and_categories_paginate() -> None:
    catalogue = Catalogue(books=300, per_page=5)
    paths = list(catalogue.paths())
    assert len(paths) == len(set(paths))
    for path in paths:
        assert catalogue.get(path) is not None, path
    category_pages = [p for p in paths if "/category/" in p and p.endswith("page-2.html")]
    assert category_pages
    tree = _tree(catalogue, category_pages[0])
    link = tree.css_first("article.product_pod h3 a")
    assert link is not None
    assert (link.attributes["href"] or "").startswith("../../")


def test_changed_fraction_reprices_that_fraction_and_keeps_other_pages() -> None:
    old = Catalogue(books=1000, version=1, changed_fraction=0.1)
    new = Catalogue(books=1000, version=2, changed_fraction=0.1)
    changed = new.changed_ids
    assert len(changed) == 100
    assert changed == Catalogue(books=1000, version=2, changed_fraction=0.1).changed_ids
    for before, after in zip(old.books, new.books, strict=True):
        assert (before.price != after.price) == (after.id in changed)
        pb, pa = old.get(old.detail_path(before)), new.get(new.detail_path(after))
        assert pb is not None
        assert pa is not None
        if after.id in changed:
            assert pb.etag != pa.etag
            assert pa.last_modified > pb.last_modified
        else:
            assert (pb.body, pb.etag, pb.last_modified) == (pa.body, pa.etag, pa.last_modified)
    for n in range(1, new.pages + 1):
        ids = {b.id for b in new.books[(n - 1) * 20 : n * 20]}
        pb, pa = old.get(old.listing_path(n)), new.get(new.listing_path(n))
        assert pb is not None
        assert pa is not None
        assert (pb.etag == pa.etag) == (not ids & changed)


def test_version_zero_has_no_changes() -> None:
    assert Catalogue(changed_fraction=0.5).changed_ids == frozenset()


def test_broken_selector_renames_price_class() -> None:
    catalogue = Catalogue(books=40, broken_selector=True)
    for path in (LISTING, catalogue.detail_path(catalogue.books[0])):
        page = catalogue.get(path)
        assert page is not None
        assert b"price_color" not in page.body
        assert b'class="price-colour"' in page.body
    assert _tree(catalogue, LISTING).css("p.price_color") == []


def test_sitemap_lists_listing_pages() -> None:
    catalogue = Catalogue(books=100)
    sitemap = catalogue.sitemap("http://127.0.0.1:9")
    assert sitemap is not None
    body = sitemap.body.decode()
    assert body.count("<loc>") == 5
    assert "<loc>http://127.0.0.1:9/catalogue/page-5.html</loc>" in body

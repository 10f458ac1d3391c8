"""The book pages' structured data: a schema.org Product with its Offer (JSON-LD) and OpenGraph, as the page says."""

from __future__ import annotations

import json
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from sluice_tools.demosite import Catalogue


def _book_page(catalogue: Catalogue, index: int) -> LexborHTMLParser:
    page = catalogue.get(catalogue.detail_path(catalogue.books[index]))
    assert page is not None
    return LexborHTMLParser(page.body.decode("utf-8"))


def _product(tree: LexborHTMLParser) -> dict[str, Any]:
    block = tree.css_first('script[type="application/ld+json"]')
    assert block is not None
    product: dict[str, Any] = json.loads(block.text())
    return product


def test_a_book_page_carries_its_product_and_offer_as_json_ld() -> None:
    catalogue = Catalogue(books=40)
    book = catalogue.books[3]
    tree = _book_page(catalogue, 3)
    blocks = tree.css('script[type="application/ld+json"]')
    assert len(blocks) == 1
    product = json.loads(blocks[0].text())
    assert product["@type"] == "Product"
    assert product["name"] == book.title
    assert product["sku"] == book.upc
    assert product["offers"] == {
        "@type": "Offer",
        "price": book.price.removeprefix("£"),
        "priceCurrency": "GBP",
        "availability": "https://schema.org/InStock",
    }
    shown = tree.css_first("div.product_main p.price_color")
    assert shown is not None
    assert shown.text() == "£" + product["offers"]["price"]


def test_a_book_page_carries_opengraph_with_its_price() -> None:
    catalogue = Catalogue(books=40)
    book = catalogue.books[0]
    tree = _book_page(catalogue, 0)
    og = {m.attrs["property"]: m.attrs["content"] for m in tree.css("meta[property]")}
    assert og == {
        "og:type": "product",
        "og:title": book.title,
        "og:url": catalogue.detail_path(book),
        "og:image": f"/media/cache/{book.upc}.jpg",
        "product:price:amount": book.price.removeprefix("£"),
        "product:price:currency": "GBP",
    }


def test_a_new_version_reprices_the_structured_data_with_the_page() -> None:
    before, after = Catalogue(books=200), Catalogue(books=200, version=1, changed_fraction=0.5)
    changed = sorted(after.changed_ids)[0] - 1
    old, new = _product(_book_page(before, changed)), _product(_book_page(after, changed))
    assert old["offers"]["price"] != new["offers"]["price"]
    assert new["offers"]["price"] == after.books[changed].price.removeprefix("£")

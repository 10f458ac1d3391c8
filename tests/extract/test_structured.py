"""Structured-data fields: JSON-LD, microdata and OpenGraph read as field values, bad input kept to its field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.extraction.extract import extract_page
from sluice.extraction.structured import MAX_BLOCK_BYTES, MAX_BLOCKS
from sluice.spec import SpecError, load_spec, parse_spec
from sluice.spec.columns import type_columns

URL = "https://shop.example/p/1"


def _spec(fields: dict[str, Any], item: str | None = None) -> Any:
    extract: dict[str, Any] = {"fields": fields}
    if item is not None:
        extract["item"] = item
    return parse_spec({"name": "shop", "seeds": [URL], "extract": extract})


def _one(fields: dict[str, Any], html: str) -> dict[str, Any]:
    records = extract_page(_spec(fields), URL, html).records
    assert len(records) == 1
    return records[0].data


def _page(*blocks: str, body: str = "", head: str = "") -> str:
    scripts = "".join(f'<script type="application/ld+json">{b}</script>' for b in blocks)
    return f"<html><head>{scripts}{head}</head><body><h1>Thing</h1>{body}</body></html>"


PRODUCT = (
    '{"@type": "Product", "name": "Lamp", "offers": {"@type": "Offer", "price": "19.90", "availability": "InStock"}}'
)
CRUMBS = '{"@type": "BreadcrumbList", "name": "crumbs", "itemListElement": [{"name": "Home"}, {"name": "Lamps"}]}'


def test_a_jsonld_path_reads_the_first_node_that_has_it() -> None:
    data = _one(
        {
            "title": "h1::text",
            "price": {"structured": "jsonld", "path": "offers.price", "process": ["price"]},
            "availability": {"structured": "jsonld", "path": "offers.availability"},
        },
        _page(PRODUCT),
    )
    assert data == {"title": "Thing", "price": 19.9, "availability": "InStock"}


def test_several_blocks_are_read_in_document_order_and_type_picks_the_node() -> None:
    html = _page(CRUMBS, PRODUCT)
    fields = {
        "first_name": {"structured": "jsonld", "path": "name"},
        "product": {"structured": "jsonld", "path": "name", "type": "Product"},
        "by_iri": {"structured": "jsonld", "path": "name", "type": "BreadcrumbList"},
        "names": {"structured": "jsonld", "path": "name", "many": True},
    }
    assert _one(fields, html) == {
        "first_name": "crumbs",
        "product": "Lamp",
        "by_iri": "crumbs",
        "names": ["crumbs", "Lamp"],
    }


def test_a_type_given_as_an_iri_matches_its_bare_name() -> None:
    html = _page(
        '{"@type": "https://schema.org/Product", "sku": "A1"}', '{"@type": ["Thing", "schema:Book"], "sku": "B2"}'
    )
    fields = {
        "product": {"structured": "jsonld", "path": "sku", "type": "Product"},
        "book": {"structured": "jsonld", "path": "sku", "type": "Book"},
    }
    assert _one(fields, html) == {"product": "A1", "book": "B2"}


def test_graph_entries_and_top_level_arrays_are_nodes() -> None:
    graph = '{"@context": "https://schema.org", "@graph": [{"@type": "WebPage", "name": "page"}, ' + PRODUCT + "]}"
    array = "[" + CRUMBS + ", " + PRODUCT.replace("Lamp", "Lamp two") + "]"
    field = {"structured": "jsonld", "path": "name", "type": "Product", "many": True}
    assert _one({"names": field}, _page(graph, array)) == {"names": ["Lamp", "Lamp two"]}


def test_arrays_on_the_path_are_walked_and_a_number_indexes_one() -> None:
    html = _page(
        '{"@type": "Product", "offers": '
        '[{"price": 5, "seller": {"name": "A"}}, {"price": 7.5, "seller": {"name": "B"}}]}'
    )
    fields = {
        "first": {"structured": "jsonld", "path": "offers.price", "process": ["number"]},
        "all": {"structured": "jsonld", "path": "offers.price", "many": True, "process": ["number"]},
        "second_seller": {"structured": "jsonld", "path": "offers.1.seller.name"},
        "beyond": {"structured": "jsonld", "path": "offers.5.price"},
    }
    assert _one(fields, html) == {"first": 5.0, "all": [5.0, 7.5], "second_seller": "B", "beyond": None}


def test_values_that_are_no_string_have_a_defined_form() -> None:
    html = _page('{"@type": "Product", "new": true, "weight": {"@value": "2 kg"}, "size": {"w": 1}, "gone": null}')
    fields = {
        "new": {"structured": "jsonld", "path": "new"},
        "weight": {"structured": "jsonld", "path": "weight"},
        "size": {"structured": "jsonld", "path": "size"},
        "gone": {"structured": "jsonld", "path": "gone"},
    }
    assert _one(fields, html) == {"new": "true", "weight": "2 kg", "size": '{"w":1}', "gone": None}


def test_html_inside_a_value_is_kept_as_written() -> None:
    html = _page('{"@type": "Product", "description": "<p>Bright &amp; <b>warm</b></p>"}')
    field = {"structured": "jsonld", "path": "description"}
    assert _one({"description": field}, html) == {"description": "<p>Bright &amp; <b>warm</b></p>"}


def test_a_broken_block_fails_the_field_it_held_and_nothing_else() -> None:
    broken = '{"@type": "Product", "name": "Lamp", "offers": {"price": "19.90",}}'  # a trailing comma
    html = _page(broken, CRUMBS)
    fields = {
        "title": "h1::text",
        "price": {"structured": "jsonld", "path": "offers.price"},
        "crumb": {"structured": "jsonld", "path": "itemListElement.name", "many": True},
    }
    extraction = extract_page(_spec(fields), URL, html)
    assert [r.data for r in extraction.records] == [{"title": "Thing", "price": None, "crumb": ["Home", "Lamps"]}]
    assert extraction.missing == {"title": 0, "price": 1, "crumb": 0}
    required = dict(fields, price={"structured": "jsonld", "path": "offers.price", "required": True})
    dropped = extract_page(_spec(required), URL, html)
    assert (dropped.records, dropped.rejected) == ([], {"price": 1})


def test_comment_and_cdata_wrappers_and_raw_newlines_in_strings_are_read() -> None:
    html = _page(
        '<!-- {"@type": "Product", "name": "A"} -->',
        '//<![CDATA[\n{"@type": "Offer", "name": "line one\nline two"}\n//]]>',
    )
    fields = {"names": {"structured": "jsonld", "path": "name", "many": True}}
    assert _one(fields, html) == {"names": ["A", "line one\nline two"]}


def test_a_block_nested_too_deep_or_too_large_is_left_out() -> None:
    deep = "[" * 200_000 + "]" * 200_000
    large = '{"name": "' + "x" * MAX_BLOCK_BYTES + '"}'
    html = _page(deep, large, '{"name": "fine"}')
    assert _one({"name": {"structured": "jsonld", "path": "name"}}, html) == {"name": "fine"}


def test_blocks_past_the_limit_are_not_read() -> None:
    blocks = [f'{{"n": {i}}}' for i in range(MAX_BLOCKS + 1)]
    field = {"structured": "jsonld", "path": "n", "many": True, "process": ["int"]}
    assert _one({"n": field}, _page(*blocks)) == {"n": list(range(MAX_BLOCKS))}


def test_opengraph_properties_are_read_by_name_each_in_order() -> None:
    head = (
        '<meta property="og:title" content="Lamp &amp; shade">'
        '<meta property="og:image" content="/a.jpg"><meta property="og:image" content="/b.jpg">'
        '<meta name="product:price:amount" content="19.90">'
        '<meta name="description" content="not OpenGraph">'
    )
    fields = {
        "title": {"structured": "opengraph", "path": "og:title"},
        "images": {"structured": "opengraph", "path": "og:image", "many": True, "process": ["absolute_url"]},
        "price": {"structured": "opengraph", "path": "product:price:amount", "process": ["price"]},
        "missing": {"structured": "opengraph", "path": "og:description"},
    }
    assert _one(fields, _page(head=head)) == {
        "title": "Lamp & shade",
        "images": ["https://shop.example/a.jpg", "https://shop.example/b.jpg"],
        "price": 19.9,
        "missing": None,
    }


MICRODATA = """
<div class="card" itemscope itemtype="https://schema.org/Product">
  <span itemprop="name">Lamp</span><img itemprop="image" src="/lamp.jpg">
  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
    <meta itemprop="price" content="19.90"><link itemprop="availability" href="https://schema.org/InStock">
  </div>
</div>
<div class="card" itemscope itemtype="https://schema.org/Product">
  <span itemprop="name">Chair</span>
  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><span itemprop="price">45</span></div>
</div>
"""


def test_microdata_is_read_per_item_with_nested_items_as_objects() -> None:
    fields = {
        "name": {"structured": "microdata", "path": "name", "type": "Product"},
        "price": {"structured": "microdata", "path": "offers.price", "process": ["price"]},
        "availability": {"structured": "microdata", "path": "offers.availability"},
        "image": {"structured": "microdata", "path": "image", "process": ["absolute_url"]},
    }
    records = extract_page(_spec(fields, item="div.card"), URL, _page(body=MICRODATA)).records
    assert [r.data for r in records] == [
        {"name": "Lamp", "price": 19.9, "availability": "https://schema.org/InStock", "image": URL[:-4] + "/lamp.jpg"},
        {"name": "Chair", "price": 45.0, "availability": None, "image": None},
    ]
    whole_page = _one({"names": {"structured": "microdata", "path": "name", "many": True}}, _page(body=MICRODATA))
    assert whole_page == {"names": ["Lamp", "Chair"]}


def test_a_page_without_structured_data_has_the_fields_missing() -> None:
    fields = {"title": "h1::text", "price": {"structured": "jsonld", "path": "offers.price"}}
    assert _one(fields, _page()) == {"title": "Thing", "price": None}


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"selector": "h1", "structured": "jsonld", "path": "a"}, "give a selector, or structured"),
        ({"process": ["strip"]}, "give a selector, or structured"),
        ({"structured": "jsonld"}, "structured: jsonld needs a path"),
        ({"selector": "h1", "path": "a"}, "path and type go with structured"),
        ({"structured": "opengraph", "path": "og:title", "type": "Product"}, "OpenGraph properties have none"),
        ({"structured": "rdfa", "path": "a"}, "'rdfa' is not one of: 'jsonld', 'microdata' or 'opengraph'"),
        ({"structured": "jsonld", "path": "offers..price"}, "String should match pattern"),
    ],
)
def test_a_bad_structured_field_is_named_by_its_path(field: dict[str, Any], message: str, tmp_path: Path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(
        "name: shop\nseeds: ['https://shop.example/']\nextract:\n  fields:\n    price: " + repr(field) + "\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert any(line.startswith("extract.fields.price") and message in line for line in caught.value.errors), (
        caught.value.errors
    )


def test_a_selector_specs_digest_is_what_it_was_before_structured_fields() -> None:
    """Every run records its spec's digest, and a changed one fetches every page whole: the new keys stay out."""
    spec = load_spec(Path(__file__).resolve().parents[2] / "crawls" / "demo-books.yaml")
    assert spec.digest() == "41eefd55223645d7"


def test_the_demo_types_book_table_types_its_structured_fields() -> None:
    spec = load_spec(Path(__file__).resolve().parents[2] / "crawls" / "demo-types.yaml")
    columns = {c.name: (c.type, c.duckdb) for c in type_columns(spec, "book")}
    assert columns["price"] == ("double", "DOUBLE")
    assert columns["availability"] == ("string", "VARCHAR")
    assert columns["currency"] == ("string", "VARCHAR")

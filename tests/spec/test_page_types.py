"""Specs with several page types: validated, typed by URL and rule, one-type specs' digests unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.extraction.extract import extract_page
from sluice.messages import UrlTask
from sluice.spec import SpecError, parse_spec

BASE: dict[str, Any] = {"name": "t", "seeds": ["https://a.example/list.html"]}
TYPES: dict[str, Any] = {
    "listing": {
        "pages": r"/list\.html$",
        "extract": {"item": "li", "fields": {"title": "a::text", "price": "span::text"}, "key": ["title"]},
        "follow": {"items": {"selectors": ["li a"], "carry": ["price"]}},
    },
    "item": {"via": ["items"], "extract": {"fields": {"name": "h1::text"}}},
}


def test_a_spec_gives_extract_or_types_not_both() -> None:
    with pytest.raises(SpecError, match="not both"):
        parse_spec({**BASE, "types": TYPES, "extract": {"fields": {"x": "h1::text"}}})
    with pytest.raises(SpecError, match="not both"):
        parse_spec(BASE)


def test_a_via_must_name_a_follow_rule_and_a_carry_a_field() -> None:
    with pytest.raises(SpecError, match="no type's follow rules"):
        parse_spec({**BASE, "types": {**TYPES, "item": {**TYPES["item"], "via": ["nope"]}}})
    listing = {**TYPES["listing"], "follow": {"items": {"selectors": ["li a"], "carry": ["nope"]}}}
    with pytest.raises(SpecError, match="not a field"):
        parse_spec({**BASE, "types": {**TYPES, "listing": listing}})


def test_a_page_is_the_first_type_its_url_and_rule_match() -> None:
    spec = parse_spec({**BASE, "types": TYPES})
    assert spec.page_type("https://a.example/list.html", None) == "listing"
    assert spec.page_type("https://a.example/x.html", "items") == "item"
    assert spec.page_type("https://a.example/x.html", None) is None


def test_records_carry_their_type_and_links_their_rule_and_item() -> None:
    spec = parse_spec({**BASE, "types": TYPES})
    html = "<ul><li><a href='/a'>A</a><span>1</span></li><li><a href='/b'>B</a><span>2</span></li></ul>"
    page = extract_page(spec, "https://a.example/list.html", html)
    assert [(r.type, r.key) for r in page.records] == [("listing", "A"), ("listing", "B")]
    assert page.rules == {"https://a.example/a": "items", "https://a.example/b": "items"}
    assert page.owners == {"https://a.example/a": 0, "https://a.example/b": 1}


def test_carried_data_is_bounded_and_scalar() -> None:
    with pytest.raises(ValueError, match="2048 bytes"):
        UrlTask(url="https://a.example/", carry={"x": "a" * 3000})
    with pytest.raises(ValueError, match="valid string"):
        UrlTask(url="https://a.example/", carry={"x": [1]})


def test_a_task_without_rule_or_carried_data_is_sent_as_before() -> None:
    assert "via" not in UrlTask(url="https://a.example/").model_dump_json()
    assert "carry" not in UrlTask(url="https://a.example/").model_dump_json()

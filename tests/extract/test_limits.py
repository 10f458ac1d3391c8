"""The nesting bound checked before a page is parsed: deep pages refused, real pages untouched."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sluice.extraction.extract import extract_page
from sluice.extraction.limits import (
    FEW_TAGS,
    MAX_DEPTH,
    PageTooComplex,
    charge,
    check_nesting,
    nesting_depth,
    page_budget,
    tag_marks,
)
from sluice.spec import CrawlSpec
from sluice_tools.demosite.catalogue import Catalogue
from sluice_tools.demosite.docs import DocsSite

PAD = "<br>" * (FEW_TAGS + 1)  # enough tags to be scanned, none nesting


def both(html: str) -> list[str | bytes]:
    return [html, html.encode()]


@pytest.mark.parametrize(
    ("html", "depth"),
    [
        (PAD + "<div>" * 2000 + "</div>" * 2000, 2000),
        (PAD + "<div>" * 2000, 2000),  # never closed
        (PAD + "<DIV>" * 300 + "</div>" * 300 + "<span>" * 10, 300),  # upper case is the same element
        (PAD + "<table><tr><td>" * 700, 700),  # tr and td close themselves; tables nest
        (PAD + "<div><span><b>x</div>" * 3000, 3),  # sloppy: </div> closes what it holds
        (PAD + "<div>" * 50 + "</span>" * 5000 + "</div>" * 50, 50),  # stray end tags close nothing
        (PAD + "<p>x" * 5000 + "<li>y" * 5000, 0),  # optional end tags nest nothing
        (PAD + "<script>" + "<div>" * 5000 + "</script>" + "<!--" + "<div>" * 5000 + "-->", 0),  # raw text
    ],
)
def test_nesting_depth_follows_the_parsers_rules_in_small(html: str, depth: int) -> None:
    for form in both(html):
        assert nesting_depth(form) == depth


def test_pages_with_few_tags_are_not_scanned() -> None:
    assert nesting_depth("<div>" * FEW_TAGS) == 0  # at worst a few ms of parsing: not worth a scan


def test_the_scan_stops_once_the_page_is_known_too_deep() -> None:
    assert nesting_depth("<div>" * 100_000, stop_at=MAX_DEPTH + 1) == MAX_DEPTH + 1


@pytest.mark.parametrize("html", both("<div>" * 100_000 + "</div>" * 100_000))
def test_a_deep_page_is_refused_unparsed(html: str | bytes) -> None:
    with pytest.raises(PageTooComplex, match="nests more than 1024 elements"):
        check_nesting(html)


def test_extraction_refuses_a_deep_page(spec: CrawlSpec) -> None:
    with pytest.raises(PageTooComplex):
        extract_page(spec, "https://books.toscrape.com/", "<div>" * 10_000)


def test_real_pages_pass(spec: CrawlSpec) -> None:
    docs = DocsSite(pages=200)
    bodies = [docs.get(p).body for p in list(docs.paths())[:20]]  # type: ignore[union-attr]
    bodies.append(Catalogue(books=200, heavy=True).get("/catalogue/page-7.html").body)  # type: ignore[union-attr]
    for body in bodies:
        check_nesting(body)
        check_nesting(body * 10)  # ten pages' worth of tags, scanned: still shallow


def test_a_page_whose_regex_could_pass_the_time_budget_is_stopped_before_it_runs(make_spec: Any) -> None:
    fields = {"blurb": {"selector": "p", "process": [{"regex": "(.*){30}x"}]}}  # 305 instructions: a legal pattern
    spec = make_spec(extract={"fields": fields})
    long = "<html><body><p>" + "ab " * 500_000 + "</p></body></html>"  # RE2: up to 1.1 s on it
    with pytest.raises(PageTooComplex, match=r"step over its bound of 1 s: regex '\(\.\*\)\{30\}x' on 1,500,000"):
        extract_page(spec, "https://books.toscrape.com/long.html", long)
    short = extract_page(spec, "https://books.toscrape.com/short.html", "<p>abx</p>")
    assert short.items == 1  # the pattern runs where it costs little
    assert short.missing == {"blurb": 1}  # its group 1, the last of 30 repeats, took the empty string


def test_the_budget_holds_only_within_a_page() -> None:
    charge(1e9, "outside any page")  # nothing to charge
    with page_budget(0.5), pytest.raises(PageTooComplex, match="over its time budget"):
        charge(0.6, "a step bound to cost 0.6 s")


def test_tag_marks_counts_every_lt_in_bytes_and_in_text_sparse_or_dense() -> None:
    rng = random.Random(18)
    pages = [b"", b"<", b"<" * 9_000, b"x" * 8_192 + b"<", b"<div>" * 20_000, "é<p>".encode() * 5_000]
    for gap in (1, 5, 47, 88, 400, 10_000):  # dense to sparse
        body = bytearray(rng.randbytes(rng.randrange(8_000, 60_000)).replace(b"<", b"a"))
        for at in range(rng.randrange(gap), len(body), gap):
            body[at] = 0x3C
        pages += [bytes(body), bytes(body[:8_192]), bytes(body[:8_193]), b"<" + bytes(body) + b"<"]
    for page in pages:
        assert tag_marks(page) == page.count(b"<")
        assert tag_marks(page.decode("latin-1")) == page.count(b"<")

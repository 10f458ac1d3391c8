"""Sitemaps parsed safely: pages and child sitemaps found, no entity expanded, lastmod read at its latest."""

from __future__ import annotations

from calendar import timegm
from datetime import datetime

import pytest

from sluice.extraction.sitemaps import SitemapEntry, SitemapError, SitemapParser, lastmod_epoch

URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc> https://b.example/a.html </loc><lastmod>2026-12-01</lastmod>
    <image:image><image:loc>https://cdn.example/a.png</image:loc></image:image></url>
  <url><loc>https://b.example/b.html?x=1&amp;y=2</loc><changefreq>daily</changefreq></url>
  <url><lastmod>2026-12-01</lastmod></url>
</urlset>
"""
INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://b.example/s1.xml.gz</loc><lastmod>2026-12-01T10:00:00Z</lastmod></sitemap>
  <sitemap><loc>https://b.example/s2.xml</loc></sitemap>
</sitemapindex>"""


def entries(body: bytes, chunk: int = 1 << 20) -> tuple[str | None, list[SitemapEntry]]:
    parser = SitemapParser()
    found = list(parser.entries(body, chunk))
    return parser.kind, found


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_a_urlset_gives_its_pages_and_nothing_an_extension_or_an_empty_url_holds(chunk: int) -> None:
    assert entries(URLSET, chunk) == (
        "urlset",
        [
            SitemapEntry("https://b.example/a.html", "2026-12-01"),
            SitemapEntry("https://b.example/b.html?x=1&y=2"),
        ],
    )


def test_an_index_gives_its_sitemaps() -> None:
    assert entries(INDEX) == (
        "sitemapindex",
        [SitemapEntry("https://b.example/s1.xml.gz", "2026-12-01T10:00:00Z"), SitemapEntry("https://b.example/s2.xml")],
    )


def test_a_sitemap_without_the_protocols_namespace_is_read_all_the_same() -> None:
    assert entries(b"<urlset><url><loc>https://b.example/</loc></url></urlset>")[1] == [
        SitemapEntry("https://b.example/")
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            b"<urlset><url><loc>&b;</loc></url></urlset>",
            "a DOCTYPE: sitemaps need none, and no DTD is read",
        ),
        (
            b'<?xml version="1.0"?><!DOCTYPE u SYSTEM "http://169.254.169.254/x.dtd"><urlset/>',
            "a DOCTYPE: sitemaps need none",
        ),
        (b"<html><body>Not found</body></html>", "not a sitemap: the root element is <html>"),
        (b"<!DOCTYPE html>\n<html><body><p>Not found</body></html>", "not a sitemap: an HTML page"),
        (b"<urlset><url><loc>https://b.example/</loc></url>", "not well-formed XML: no element found at line 1"),
        (b"<urlset><url><loc>x</url></urlset>", "not well-formed XML: mismatched tag at line 1, column 21"),
        (b"", "not well-formed XML: no element found"),
        (b"\x1f\x8b\x08\x00", "not well-formed XML: not well-formed (invalid token) at line 1, column 0"),
    ],
)
def test_what_is_not_a_safe_sitemap_is_an_error_saying_why(body: bytes, reason: str) -> None:
    with pytest.raises(SitemapError) as caught:
        entries(body)
    assert str(caught.value).startswith(reason)


def test_a_huge_text_node_is_kept_to_a_bound() -> None:
    body = b"<urlset><url><loc>https://b.example/" + b"a" * 100_000 + b"</loc></url></urlset>"
    [entry] = entries(body, 1024)[1]
    assert len(entry.loc) == 4096


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    return timegm(datetime(year, month, day, hour, minute, second).timetuple())


@pytest.mark.parametrize(
    ("value", "latest"),
    [
        ("2026-12-01T10:30:15Z", utc(2026, 12, 1, 10, 30, 15)),
        ("2026-12-01T10:30:15.25+02:00", utc(2026, 12, 1, 8, 30, 15)),
        ("2026-12-01T10:30:15+0530", utc(2026, 12, 1, 5, 0, 15)),
        ("2026-12-01T10:30Z", utc(2026, 12, 1, 10, 30, 59)),
        ("2026-12-01T10:30:15", utc(2026, 12, 1, 22, 30, 15)),  # no zone: the westernmost one's
        ("2026-12-01", utc(2026, 12, 2, 11, 59, 59)),  # the whole day, wherever it was that day
        ("2026-12", utc(2027, 1, 1, 11, 59, 59)),
        ("2026", utc(2027, 1, 1, 11, 59, 59)),
        ("2026-02-30", None),
        ("2026-13", None),
        ("yesterday", None),
        ("", None),
        (None, None),
        ("9999", None),
    ],
)
def test_lastmod_is_the_latest_second_its_precision_allows(value: str | None, latest: int | None) -> None:
    assert lastmod_epoch(value) == latest

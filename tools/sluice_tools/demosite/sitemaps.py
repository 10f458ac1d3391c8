"""The catalogue's sitemaps: an index, a plain child for the listing pages, a gzipped one for the books.

``/sitemap-index.xml`` lists ``/sitemaps/listings.xml`` and ``/sitemaps/books.xml.gz`` (a gzip
file, served as ``application/x-gzip`` with no Content-Encoding, as most sites serve theirs); the
older ``/sitemap.xml`` lists the listing pages alone. Each page's ``<lastmod>`` moves when a
version changes it: a page changed by the catalogue's current version says when that version was
published (wall-clock time, so a crawler compares it with its own fetch times), an older change
keeps its fixed day (2024-01-01 plus one day a version), long before any run.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterable
from html import escape

from .page import Page

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
INDEX_PATH = "/sitemap-index.xml"
LISTINGS_PATH = "/sitemaps/listings.xml"
BOOKS_PATH = "/sitemaps/books.xml.gz"
XML = "application/xml; charset=utf-8"
GZIP = "application/x-gzip"


def w3c(epoch: float) -> str:
    """A W3C Datetime to the second, in UTC: what ``<lastmod>`` holds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def urlset(entries: Iterable[tuple[str, float]]) -> bytes:
    """A ``<urlset>`` of ``(absolute URL, lastmod epoch)``."""
    urls = "".join(f"<url><loc>{escape(loc)}</loc><lastmod>{w3c(at)}</lastmod></url>\n" for loc, at in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n{urls}</urlset>\n'.encode()


def sitemap_index(entries: Iterable[tuple[str, float]]) -> bytes:
    """A ``<sitemapindex>`` of ``(absolute sitemap URL, lastmod epoch)``."""
    maps = "".join(f"<sitemap><loc>{escape(loc)}</loc><lastmod>{w3c(at)}</lastmod></sitemap>\n" for loc, at in entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{NS}">\n{maps}</sitemapindex>\n'.encode()


def xml_page(body: bytes) -> Page:
    return Page(body, XML)


def gzip_page(body: bytes) -> Page:
    """A gzip file of ``body`` (mtime 0: the same bytes every time), served as a file, not a content coding."""
    return Page(gzip.compress(body, 6, mtime=0), GZIP)

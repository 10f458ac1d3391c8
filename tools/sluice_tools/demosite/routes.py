"""Content routes: pages with validators and gzip, redirects to page 1 and the docs index, robots, sitemaps."""

from __future__ import annotations

from functools import lru_cache

from . import access
from .catalogue import Catalogue
from .config import DemoSiteConfig
from .faults import error_page
from .http1 import Request, Response
from .page import Page
from .sitemaps import INDEX_PATH

_HOME = frozenset({"/", "/index.html", "/catalogue", "/catalogue/", "/catalogue/index.html"})
_DOCS_HOME = frozenset({"/docs", "/docs/"})
_GIF = bytes.fromhex("47494638396101000100800000ffffff00000021f90401000000002c00000000010001000002024401003b")
SITEMAPS = ("/sitemap.xml", INDEX_PATH, "/sitemaps/")
NOT_CONTENT = ("/robots.txt", *SITEMAPS, "/_test/", "/_demo/")
"""Path prefixes that are never subject to injected faults."""


def accepts_gzip(request: Request) -> bool:
    """True when Accept-Encoding lists gzip with a non-zero q-value."""
    for item in request.headers.get("accept-encoding", "").lower().split(","):
        coding, _, params = item.partition(";")
        if coding.strip() in ("gzip", "x-gzip"):
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def page_response(page: Page, request: Request) -> Response:
    """200 (gzip when accepted) or 304 when If-None-Match / If-Modified-Since say so."""
    headers = [
        ("ETag", page.etag),
        ("Last-Modified", page.last_modified_http),
        ("Vary", "Accept-Encoding"),
    ]
    h = request.headers
    if page.not_modified(h.get("if-none-match"), h.get("if-modified-since")):
        return Response(304, headers)
    headers.append(("Content-Type", page.content_type))
    if page.compressible and accepts_gzip(request):
        headers.append(("Content-Encoding", "gzip"))
        return Response(200, headers, page.gzipped)
    return Response(200, headers, page.body)


@lru_cache(maxsize=16)
def robots(crawl_delay: float | None, base_url: str) -> Page:
    """robots.txt disallowing /private/ for everyone, with an optional Crawl-delay, naming the sitemaps."""
    text = "User-agent: *\nDisallow: /private/\n"
    if crawl_delay is not None:
        text += f"Crawl-delay: {crawl_delay:g}\n"
    text += f"\nSitemap: {base_url}{INDEX_PATH}\nSitemap: {base_url}/sitemap.xml\n"
    return Page(text.encode(), "text/plain; charset=utf-8")


_GIF_PAGE = Page(_GIF, "image/gif")


def _base(request: Request) -> str:
    return f"http://{request.headers.get('host', '127.0.0.1')}"


def content(request: Request, catalogue: Catalogue, config: DemoSiteConfig) -> Response:
    """The normal (fault-free) answer for a non-test path."""
    if request.method not in ("GET", "HEAD"):
        return error_page(405, "Method not allowed.", [("Allow", "GET, HEAD")])
    prefix, path = access.split(request.path)
    if prefix:
        return _protected(prefix, path, request, catalogue, config)
    if path in _HOME:
        return Response(301, [("Location", catalogue.listing_path(1))])
    if path in _DOCS_HOME:
        return Response(301, [("Location", "/docs/index.html")])
    if path == "/robots.txt":
        return page_response(robots(config.crawl_delay, _base(request)), request)
    if path.startswith(SITEMAPS):
        sitemap = catalogue.sitemap(_base(request), path)
        return page_response(sitemap, request) if sitemap is not None else error_page(404, "Not found.")
    if path.startswith("/media/"):
        return page_response(_GIF_PAGE, request)
    page = catalogue.get(path)
    if page is None:
        return error_page(404, "Not found.")
    return page_response(page, request)


def _protected(prefix: str, path: str, request: Request, catalogue: Catalogue, config: DemoSiteConfig) -> Response:
    """The catalogue's pages behind ``prefix`` (``access.py``): refused without the credentials it wants."""
    refused = access.refusal(prefix, request, config)
    if refused is not None:
        return refused
    if path in _HOME:
        return Response(301, [("Location", prefix + catalogue.listing_path(1))])
    if path.startswith(SITEMAPS):  # the same sitemaps, of the pages behind the same door
        sitemap = catalogue.sitemap(_base(request) + prefix, path)
        return page_response(sitemap, request) if sitemap is not None else error_page(404, "Not found.")
    page = catalogue.get(path)
    return error_page(404, "Not found.") if page is None else page_response(page, request)

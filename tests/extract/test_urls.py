"""Link resolution, canonical URLs and the crawl scope."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sluice.extraction.urls import Scope, canonicalize_url, resolve_link
from sluice.spec import CrawlSpec

PAGE = "https://books.toscrape.com/catalogue/category/books_1/page-1.html"


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://books.toscrape.com/a?b=2&a=1#reviews", "https://books.toscrape.com/a?a=1&b=2"),
        ("HTTPS://Books.ToScrape.COM/Catalogue/", "https://books.toscrape.com/Catalogue/"),
        ("http://books.toscrape.com:80/x", "http://books.toscrape.com/x"),
        ("https://books.toscrape.com:443/x", "https://books.toscrape.com/x"),
        ("https://books.toscrape.com:443", "https://books.toscrape.com/"),
        ("https://books.toscrape.com:8443/x", "https://books.toscrape.com:8443/x"),
        ("http://books.toscrape.com:443/x", "http://books.toscrape.com:443/x"),
        ("https://books.toscrape.com/caf\u00e9 cr\u00e8me", "https://books.toscrape.com/caf%C3%A9%20cr%C3%A8me"),
    ],
)
def test_canonicalize_url(url: str, canonical: str) -> None:
    assert canonicalize_url(url) == canonical


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        ("page-2.html", "https://books.toscrape.com/catalogue/category/books_1/page-2.html"),
        ("../../../a-light_1000/index.html", "https://books.toscrape.com/a-light_1000/index.html"),
        ("/index.html", "https://books.toscrape.com/index.html"),
        ("//cdn.example.com/x.html", "https://cdn.example.com/x.html"),
        ("http://other.example/x", "http://other.example/x"),
        ("  \n page-2.html\t ", "https://books.toscrape.com/catalogue/category/books_1/page-2.html"),
        ("?page=2", "https://books.toscrape.com/catalogue/category/books_1/page-1.html?page=2"),
        ("a b.html", "https://books.toscrape.com/catalogue/category/books_1/a%20b.html"),
    ],
)
def test_resolve_link(href: str, resolved: str) -> None:
    assert resolve_link(href, PAGE) == resolved


@pytest.mark.parametrize(
    "href",
    [
        "",
        "   ",
        None,
        "javascript:void(0)",
        "JavaScript:alert(1)",
        "java\nscript:alert(1)",
        "mailto:books@example.com",
        "tel:+441234567",
        "data:text/html,hi",
        "ftp://files.example.com/x",
        "http://[::1",
        "http://books.toscrape.com:99999/",
    ],
)
def test_resolve_link_refuses_non_http_links(href: str | None) -> None:
    assert resolve_link(href, PAGE) is None


def test_resolve_link_against_base_href() -> None:
    assert (
        resolve_link("page-2.html", PAGE, "https://mirror.example/books/") == "https://mirror.example/books/page-2.html"
    )
    assert resolve_link("page-2.html", PAGE, "/other/") == "https://books.toscrape.com/other/page-2.html"


def test_scope_allows_domain_and_subdomains(make_spec: Callable[..., CrawlSpec]) -> None:
    scope = Scope.from_spec(make_spec(follow={"allowed_domains": ["toscrape.com"]}))
    assert scope.allows("https://toscrape.com/")
    assert scope.allows("https://books.toscrape.com/catalogue/page-2.html")
    assert scope.allows("http://BOOKS.toscrape.com./x")
    assert not scope.allows("https://nottoscrape.com/")
    assert not scope.allows("https://toscrape.com.evil.example/")
    assert not scope.allows("mailto:a@toscrape.com")
    assert scope.reason("https://example.com/") == "host 'example.com' is not in the allowed domains"


def test_scope_defaults_to_seed_hosts(make_spec: Callable[..., CrawlSpec]) -> None:
    scope = Scope.from_spec(make_spec(follow={}))
    assert scope.allows("https://books.toscrape.com/catalogue/page-9.html")
    assert not scope.allows("https://quotes.toscrape.com/")


def test_scope_allow_and_deny_patterns(make_spec: Callable[..., CrawlSpec]) -> None:
    follow = {"allowed_domains": ["books.toscrape.com"], "allow": [r"/catalogue/"], "deny": [r"/page-\d*[05]\.html$"]}
    scope = Scope.from_spec(make_spec(follow=follow))
    assert scope.allows("https://books.toscrape.com/catalogue/page-2.html")
    assert (
        scope.reason("https://books.toscrape.com/catalogue/page-10.html")
        == r"matches follow.deny '/page-\\d*[05]\\.html$'"
    )
    assert scope.reason("https://books.toscrape.com/index.html") == "matches no follow.allow pattern"


def test_scope_domain_with_port(make_spec: Callable[..., CrawlSpec]) -> None:
    scope = Scope.from_spec(make_spec(follow={"allowed_domains": ["localhost:8080", "books.toscrape.com"]}))
    assert scope.allows("http://localhost:8080/x")
    assert not scope.allows("http://localhost:9090/x")
    assert scope.allows("https://books.toscrape.com:8443/x")


RFC3986_BASE = "http://a/b/c/d;p?q"


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q#s"),
        ("g#s", "http://a/b/c/g#s"),
        ("g?y#s", "http://a/b/c/g?y#s"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y#s"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g#s/./x"),
        ("g#s/../x", "http://a/b/c/g#s/../x"),
    ],
)
def test_resolve_link_follows_rfc3986_examples(href: str, resolved: str) -> None:
    assert resolve_link(href, RFC3986_BASE) == resolved


@pytest.mark.parametrize(
    ("href", "base", "resolved"),
    [
        ("g", "http://a/b/./c/d", "http://a/b/c/g"),
        ("g", "http://a/b/../c/d", "http://a/c/g"),
        ("g.html", "http://a/.b/c", "http://a/.b/g.html"),
        ("x/index.html", "http://a:8080/b/c.html", "http://a:8080/b/x/index.html"),
        ("x/index.html?p=1#f", "http://a/b/c.html", "http://a/b/x/index.html?p=1#f"),
        ("x.y/z.html", "http://a/b/", "http://a/b/x.y/z.html"),
        ("/x.y/./z", "http://a/b/", "http://a/x.y/z"),
    ],
)
def test_resolve_plain_relative_links(href: str, base: str, resolved: str) -> None:
    assert resolve_link(href, base) == resolved

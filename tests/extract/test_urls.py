"""Link resolution (the WHATWG URL Standard's own test data), canonical URLs and the crawl scope."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sluice.extraction.urls import LinkJudge, Scope, canonical_link, canonicalize_url, has_credentials, resolve_link
from sluice.spec import CrawlSpec

PAGE = "https://books.toscrape.com/catalogue/category/books_1/page-1.html"
_DATA = Path(__file__).parent / "data" / "urltestdata.json"
_CASES: list[dict[str, Any]] = [c for c in json.loads(_DATA.read_text("utf-8")) if isinstance(c, dict)]
# The cases a page can hold: a link resolved against an http(s) page. The standard's result is
# either an http(s) URL (which resolve_link must give exactly) or anything else, failures
# included (which resolve_link must refuse, as a crawler fetches only http(s)).
_LINK_CASES = [c for c in _CASES if str(c.get("base") or "").startswith(("http:", "https:"))]
# The cases a seed can be: an absolute URL, no base. canonicalize_url must take exactly those
# the standard parses to an http(s) URL.
_SEED_CASES = [c for c in _CASES if c.get("base") is None]


def _expected(case: dict[str, Any]) -> str | None:
    href = None if case.get("failure") else case["href"]
    return href if href is not None and href.startswith(("http:", "https:")) else None


def test_the_standards_test_data_is_all_there() -> None:
    assert len(_CASES) >= 880
    assert len(_LINK_CASES) >= 200
    assert len(_SEED_CASES) >= 500
    assert sum(1 for c in _LINK_CASES + _SEED_CASES if _expected(c) is not None) >= 240
    assert sum(1 for c in _LINK_CASES + _SEED_CASES if _expected(c) is None) >= 200


def test_links_resolve_as_the_url_standard_says() -> None:
    wrong = [
        (c["input"], c["base"], resolve_link(c["input"], c["base"]), _expected(c))
        for c in _LINK_CASES
        if resolve_link(c["input"], c["base"]) != _expected(c)
    ]
    assert wrong == [], f"{len(wrong)} of {len(_LINK_CASES)} cases differ, first: {wrong[:5]}"


def test_seeds_parse_as_the_url_standard_says() -> None:
    wrong = []
    for case in _SEED_CASES:
        expected = _expected(case)
        try:
            got: str | None = canonicalize_url(case["input"])
        except ValueError:
            got = None
        if got != (canonicalize_url(expected) if expected is not None else None):
            wrong.append((case["input"], got, expected))
    assert wrong == [], f"{len(wrong)} of {len(_SEED_CASES)} cases differ, first: {wrong[:5]}"


def test_canonical_links_are_canonical_forms_of_the_standards_result() -> None:
    """canonical_link is resolve_link then canonicalize_url, on every case of the standard."""
    for case in _LINK_CASES:
        resolved = resolve_link(case["input"], case["base"])
        got = canonical_link(case["input"], case["base"])
        assert got == (canonicalize_url(resolved) if resolved is not None else None), case["input"]


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        (r"\\x\hello", "http://x/hello"),  # backslashes are slashes in http(s) URLs
        (r"\x", "http://example.org/x"),
        ("http:example.com/", "http://example.org/foo/example.com/"),  # same scheme: a relative link
        ("https:example.com/", "https://example.com/"),
        ("https://fa\u00df.ExAmPlE/", "https://xn--fa-hia.example/"),  # IDNA 2008, not fass.example
    ],
)
def test_browser_resolution_where_rfc3986_differs(href: str, resolved: str) -> None:
    assert resolve_link(href, "http://example.org/foo/bar") == resolved


@pytest.mark.parametrize("host", ["exa mple.com", "192.168.0.257", "a<b.com", "%zz.com", "[::1"])
def test_links_the_standard_calls_invalid_are_refused(host: str) -> None:
    assert resolve_link(f"http://{host}/x", PAGE) is None
    assert canonical_link(f"http://{host}/x", PAGE) is None


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
        ("https://books.toscrape.com/%7euser/%2fx?q=%7e%2f", "https://books.toscrape.com/~user/%2Fx?q=~%2F"),
        ("https://books.toscrape.com/a?&&b=1&&", "https://books.toscrape.com/a?b=1"),
        ("https://books.toscrape.com/a?", "https://books.toscrape.com/a"),
        ("https://books.toscrape.com/a/./b/../c", "https://books.toscrape.com/a/c"),
        ("https://user:pa%40ss@books.toscrape.com/x", "https://books.toscrape.com/x"),
        ("https://user@books.toscrape.com:8443/x", "https://books.toscrape.com:8443/x"),
        ("https://[::1]:8443/x#y", "https://[::1]:8443/x"),
    ],
)
def test_canonicalize_url(url: str, canonical: str) -> None:
    assert canonicalize_url(url) == canonical
    assert canonicalize_url(canonical) == canonical  # idempotent


@pytest.mark.parametrize("url", ["ftp://files.example.com/x", "not a url", "http://exa mple.com/", "mailto:a@b.c"])
def test_canonicalize_url_refuses_what_is_not_http(url: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        canonicalize_url(url)


def test_credentials_never_survive_into_a_queued_link() -> None:
    """A page must not be able to make the crawler send credentials of its choosing."""
    for href in [
        "http://user:pass@books.toscrape.com/x",
        "//u:p@books.toscrape.com/x",
        "https://:p@books.toscrape.com/x",
    ]:
        link = canonical_link(href, PAGE)
        assert link == f"{'https' if href.startswith('//') else href.split(':')[0]}://books.toscrape.com/x"
        assert has_credentials(resolve_link(href, PAGE) or "")
    assert not has_credentials("https://books.toscrape.com/a@b")
    assert not has_credentials("not a url")


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
    # A base that is not an http(s) URL is ignored, as browsers ignore an invalid one.
    assert resolve_link("x", PAGE, "javascript:alert(1)") == "https://books.toscrape.com/catalogue/category/books_1/x"
    assert resolve_link("x", PAGE, "http://exa mple/") == "https://books.toscrape.com/catalogue/category/books_1/x"


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


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://a.example/p?b=2&a=1#top", "http://a.example/p?a=1&b=2"),  # argument order, fragment
        ("http://a.example/%7euser?q=%7e&q=a%2f", "http://a.example/~user?q=a%2F&q=~"),  # escapes, then order
        ("http://a.example/p?a&&b=", "http://a.example/p?a=&b="),  # a key without a value
        ("http://a.example/p?x=a%20b", "http://a.example/p?x=a+b"),  # a space in a query
        ("http://A.example/", "http://a.example/"),  # host case
    ],
)
def test_links_w3lib_calls_one_page_are_one_page(one: str, other: str) -> None:
    from w3lib.url import canonicalize_url as w3lib_canonical

    assert w3lib_canonical(one) == w3lib_canonical(other)
    assert canonicalize_url(one) == canonicalize_url(other)


def test_the_link_judge_agrees_with_the_scope_on_every_case_of_the_standard(
    make_spec: Callable[..., CrawlSpec],
) -> None:
    follow = {"allowed_domains": ["example.org", "localhost:8000"], "deny": [r"/foo/b"], "allow": [r"\w"]}
    scope = Scope.from_spec(make_spec(seeds=["http://example.org/"], follow=follow))
    judge = LinkJudge(scope)
    judged = 0
    for case in _LINK_CASES * 2:  # twice: the second time from what the judge remembers
        canonical = canonical_link(case["input"], case["base"])
        verdict = judge.judge(case["input"], case["base"])
        assert verdict == (None if canonical is None else (canonical, scope.allows(canonical))), case["input"]
        judged += verdict is not None and verdict[1]
    assert judged >= 50


def test_resolution_agrees_with_adas_own_wrapper_on_every_case_of_the_standard() -> None:
    """Links are resolved by calling ada's C functions directly; its Python wrapper is the reference."""
    import ada_url

    from sluice.extraction.urls import _join

    def reference(base: str, href: str) -> str | None:
        try:
            return ada_url.join_url(base, href)
        except ValueError:
            return None

    bases = [*sorted({str(c["base"]) for c in _CASES if c.get("base")})[::7], PAGE, "not a url", "\ud800"]
    hrefs = [*(str(c["input"]) for c in _CASES), "\ud800", "x" * 10_000]
    wrong = [(b, h) for b in bases for h in hrefs if _join(b, h) != reference(b, h)]
    assert wrong == [], wrong[:5]
    assert canonicalize_url("HTTP://Example.COM:80/a/../b?z=1&a") == "http://example.com/b?a=&z=1"


def _ada_join(base: str, href: str) -> str | None:
    import ada_url

    try:
        return ada_url.join_url(base, href)
    except ValueError:
        return None


_BASES = [
    PAGE,
    "http://u:p@h:8080/a/b/c?q=1#f",
    "http://h",
    "http://h//",
    "http://h/a//b",
    "HTTP://H/A/B?x#y",
    "http://h/a/./b/../c/",
    "http://[::1]:81/x/y",
    "https://fa\u00df.example/%7e/a?b#c#d",
    " http://h/a\t/b ",
    "http://h/a?q/r/s",
    "http://h/a#f/g/h",
    "https://h:443/x/",
    "http://h/%2e%2E/a/",
    "ws://h/a/b",
    "file:///C:/a/b",
    "mailto:x",
    "not a url",
    "",
]
_ATOMS = [
    *"ab0Z~-_!$&'()*+,;=@^|`{}[]<>\"%:?#/\\ \t\n\r\x00\x1f\u00a0\u00e9\u00df",
    *("..", ".", "./", "../", "/../", "/./", "//", "%2e", "%2E", ".%2e", "%2e%2E", "%41", "%4"),
    *("http:", "HTTP:", "https:", "ftp:", "a:b", "javascript:", "//host", "[::1]", ":80"),
    *("index.html", "page-2", "q=1"),
]


def _generated_hrefs(count: int) -> list[str]:
    """Seeded random references built from the pieces a resolver gets wrong (dots, escapes, slashes,
    schemes, whitespace, controls, unicode), plus some long ones."""
    import random

    rng = random.Random(18)
    hrefs = ["", "#", "?", ".", "..", "./", "../", "/", "/.", "/..", "x" * 10_000, "a/" * 3_000, "../" * 50 + "x"]
    hrefs += ["".join(rng.choice(_ATOMS) for _ in range(rng.randint(1, 8))) for _ in range(count)]
    return hrefs


def test_the_join_from_a_base_parsed_once_is_adas_join() -> None:
    """The join puts the common references together from the base parsed once a page (and parses
    others alone); every base of the standard and some odd ones, against every input of the standard
    and generated references, must give exactly ada's own join."""
    from sluice.extraction.urls import _join

    bases = [*sorted({str(c["base"]) for c in _CASES if c.get("base")}), *_BASES]
    hrefs = [*(str(c["input"]) for c in _CASES), *_generated_hrefs(1_500)]
    wrong = [(b, h, _join(b, h)) for b in bases for h in hrefs if _join(b, h) != _ada_join(b, h)]
    assert wrong == [], f"{len(wrong)} differ, first: {wrong[:5]}"
    # the same pairs in another order: the base remembered last must never answer for another
    interleaved = [(b, h) for h in hrefs[::50] for b in bases if _join(b, h) != _ada_join(b, h)]
    assert interleaved == [], interleaved[:5]


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        ("b/c.html", "http://h/x/y/b/c.html"),
        ("../../../z/index.html", "http://h/z/index.html"),
        ("./../b/./c", "http://h/x/b/c"),
        ("b/../c/.", "http://h/x/y/c/"),
        ("/a/b?q=1#top", "http://h/a/b?q=1#top"),
        ("/../a", "http://h/a"),
        ("?page=2", "http://h/x/y/z.html?page=2"),
        ("#top", "http://h/x/y/z.html?q=1#top"),
        ("", "http://h/x/y/z.html?q=1"),
        ("//other.example/a", "http://other.example/a"),
        ("https://Other.Example:443/a/./b", "https://other.example/a/b"),
        ("b c/%2e%2E/d", "http://h/x/y/d"),
        ("a:b", None),
    ],
)
def test_common_references_from_a_deep_page(href: str, resolved: str | None) -> None:
    assert resolve_link(href, "http://h/x/y/z.html?q=1#frag") == resolved


def test_a_pages_links_are_joined_without_parsing_the_base_for_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """ada's C API has no join against a parsed base: a join through it parses the base again. A
    page's relative, root-relative, query and fragment links are put together from the base parsed
    once, and absolute ones are parsed alone."""
    from sluice.extraction import urls

    calls: dict[str, int] = {}

    class Counting:
        def __init__(self, real: Any) -> None:
            self.real = real

        def __getattr__(self, name: str) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return getattr(self.real, name)

    monkeypatch.setattr(urls, "_ada", Counting(vars(urls)["_ada"]))
    page = "http://h/docs/guide/page-9.html"
    hrefs = [f"p-{n}.html" for n in range(50)] + [f"../t-{n}/index.html" for n in range(50)]
    hrefs += [f"/a/{n}" for n in range(50)] + [f"?page={n}" for n in range(50)] + [f"#s{n}" for n in range(50)]
    hrefs += [f"https://e{n}.example/" for n in range(50)]
    resolved = [resolve_link(href, page) for href in hrefs]
    assert resolved[:2] == ["http://h/docs/guide/p-0.html", "http://h/docs/guide/p-1.html"]
    assert resolved[50] == "http://h/docs/t-0/index.html"
    assert resolved[100] == "http://h/a/0"
    assert resolved[150] == "http://h/docs/guide/page-9.html?page=0"
    assert resolved[200] == "http://h/docs/guide/page-9.html#s0"
    assert resolved[-1] == "https://e49.example/"
    assert calls.get("ada_parse_with_base", 0) == 0
    assert calls.get("ada_parse", 0) <= 1 + 50  # the page once, each absolute link alone

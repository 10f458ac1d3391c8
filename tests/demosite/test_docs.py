"""The link-heavy docs site under /docs/: links per page, reachability, validators, versions, the spec."""

from __future__ import annotations

import http.client
import posixpath
import re
import time
from collections import deque
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser

from sluice.extraction.extract import extractor_for
from sluice.spec import load_spec
from sluice_tools.demosite import Catalogue, DocsSite, RunningDemoSite, running_demo_site
from sluice_tools.demosite.page import version_time

INDEX = "/docs/index.html"
_ANCHOR_HREF = re.compile(rb'<a\s[^>]*?\bhref="([^"]*)"')
SPEC = Path(__file__).resolve().parents[2] / "crawls" / "demo-docs.yaml"
SPEC_HOST = "127.0.0.1:8710"
SPEC_ORIGIN = f"http://{SPEC_HOST}"
"""The origin crawls/demo-docs.yaml seeds and allows."""


def _hrefs(html: bytes, css: str = "a[href]") -> list[str]:
    """The href of every element `css` selects, in page order."""
    return [node.attributes.get("href") or "" for node in LexborHTMLParser(html).css(css)]


def _anchor_hrefs(html: bytes) -> list[str]:
    """`_hrefs(html)` for the site's own markup (double-quoted, entity-free hrefs), ten times faster."""
    return [href.decode() for href in _ANCHOR_HREF.findall(html)]


def _target(origin: str, page_path: str, href: str) -> str | None:
    """The page an href names from `page_path`: its path, fragment and query dropped (the site ignores
    queries such as `?highlight=`), or None outside `origin`'s /docs/. RFC 3986 resolution of the
    reference forms the site uses, checked against urljoin below (which is five times slower)."""
    bare = href.partition("#")[0].partition("?")[0]
    if "://" in bare or bare.startswith("//"):
        parts = urlsplit(bare)
        path = parts.path if parts.netloc == origin else ""
    elif not bare:
        path = page_path
    elif bare.startswith("/"):
        path = bare
    elif "/" not in bare:
        path = page_path[: page_path.rfind("/") + 1] + bare
    else:
        path = posixpath.normpath(page_path[: page_path.rfind("/") + 1] + bare)
    return path if path.startswith("/docs/") else None


def _pages(origin: str, page_path: str, hrefs: list[str]) -> tuple[set[str], int]:
    """The distinct in-scope pages `hrefs` name, and how many hrefs leave the origin or /docs/."""
    targets = [_target(origin, page_path, href) for href in hrefs]
    return {t for t in targets if t is not None}, targets.count(None)


def _breadth_first(site: RunningDemoSite, limit: int) -> dict[str, int]:
    """Path -> hops from the docs index over the served HTML; fails rather than fetch more than `limit` pages.

    One keep-alive http.client connection: in-process, httpx costs three times as much per request.
    """
    origin = f"{site.site.host}:{site.port}"
    with closing(http.client.HTTPConnection(site.site.host, site.port, timeout=10)) as connection:
        return _walk(connection, origin, limit)


def _walk(connection: http.client.HTTPConnection, origin: str, limit: int) -> dict[str, int]:
    depth = {INDEX: 0}
    queue = deque([INDEX])
    # Pages of one directory share most hrefs (the sidebar): resolve each (directory, href) once.
    known: dict[tuple[str, str], str | None] = {}
    for _ in range(limit):
        if not queue:
            return depth
        path = queue.popleft()
        connection.request("GET", path)  # no Accept-Encoding: gzip would double the server's work here
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, path
        directory = path[: path.rfind("/") + 1]
        for href in _anchor_hrefs(body):
            if href.startswith("#"):
                continue  # the page itself
            key = (directory, href)
            if key not in known:
                known[key] = _target(origin, path, href)
            page = known[key]
            if page is not None and page not in depth:
                depth[page] = depth[path] + 1
                queue.append(page)
    pytest.fail(f"the crawl had not ended after {limit} fetches")


def _fetch(connection: http.client.HTTPConnection, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status and ETag of a GET on a keep-alive connection (the body is read and dropped)."""
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    response.read()
    return response.status, response.getheader("ETag", "")


def _body(docs: DocsSite, path: str) -> bytes:
    page = docs.get(path)
    assert page is not None, path
    return page.body


@pytest.fixture(scope="module")
def docs300() -> Iterator[RunningDemoSite]:
    """A site with 300 docs articles (3 sections) and a token catalogue; tests must not change it."""
    with running_demo_site(books=20, docs_pages=300) as running:
        yield running


@pytest.fixture
def docs_client(docs300: RunningDemoSite) -> Iterator[httpx.Client]:
    """A client for `docs300` that never follows redirects."""
    with httpx.Client(base_url=docs300.base_url, timeout=10, follow_redirects=False, trust_env=False) as c:
        yield c


def test_every_article_links_to_at_least_200_distinct_in_scope_pages() -> None:
    docs = DocsSite(pages=300)
    sidebars: set[str] = set()
    for article in docs.plan.pages:
        body = _body(docs, article.path)
        hrefs = _hrefs(body)
        pages, out_of_scope = _pages(SPEC_HOST, article.path, hrefs)
        pages.discard(article.path)
        assert len(pages) >= 200, article.path
        assert all(docs.get(p) is not None for p in pages), "no dead links"
        assert out_of_scope == 4, "shop (header and text), Edit, Sphinx"
        # Some hrefs name a page again, differing from a plain href on the page only by fragment or query.
        plain = _pages(SPEC_HOST, article.path, [h for h in hrefs if "#" not in h and "?" not in h])[0]
        fragments = _pages(SPEC_HOST, article.path, [h for h in hrefs if "#" in h[1:]])[0]
        highlights = _pages(SPEC_HOST, article.path, [h for h in hrefs if "?highlight=" in h])[0]
        assert fragments
        assert highlights
        assert fragments | highlights <= plain
        # The links the spec follows (sidebar and text) reach the same pages.
        followed = _hrefs(body, "nav.docs-nav a, main.docs-body a")
        assert _pages(SPEC_HOST, article.path, followed)[0] - {article.path} == pages
        nav = LexborHTMLParser(body).css_first("nav.docs-nav")
        assert nav is not None
        sidebars.add(str(nav.html).replace('<li class="current">', "<li>"))
    assert len(sidebars) == len(docs.plan.sections), "one sidebar per section, shared by its pages"


def test_link_helpers_of_these_tests_agree_with_the_parser_and_urljoin() -> None:
    docs = DocsSite(pages=300)
    for path in (INDEX, docs.plan.sections[1].path, docs.plan.pages[150].path):
        hrefs = _hrefs(_body(docs, path))
        assert _anchor_hrefs(_body(docs, path)) == hrefs
        for href in hrefs:
            parts = urlsplit(urljoin(f"http://{SPEC_HOST}{path}", href))
            in_scope = parts.netloc == SPEC_HOST and parts.path.startswith("/docs/")
            assert _target(SPEC_HOST, path, href) == (parts.path if in_scope else None), href


def test_articles_weigh_20_to_40_kb_and_carry_title_section_and_last_updated() -> None:
    docs = DocsSite(pages=300, version=3, changed_fraction=0.2)
    for article in docs.plan.pages:
        body = _body(docs, article.path)
        assert 20_000 <= len(body) <= 40_000, article.path
        tree = LexborHTMLParser(body)
        h1, section, updated = (tree.css_first(c) for c in ("article h1", "a.section", "p.last-updated time"))
        assert h1 is not None
        assert h1.text() == article.title
        assert section is not None
        assert section.text() == article.section.name
        assert updated is not None
        assert updated.attributes["datetime"] == time.strftime(
            "%Y-%m-%d", time.gmtime(version_time(article.changed_in))
        )
    assert len({a.title for a in docs.plan.pages}) == 300
    assert len({a.path for a in docs.plan.pages}) == 300


def test_breadth_first_crawl_reaches_every_page_within_two_hops(docs300: RunningDemoSite) -> None:
    depth = _breadth_first(docs300, limit=1000)
    docs = docs300.catalogue.docs
    assert len(docs.plan.sections) == 3
    assert len(depth) == 300 + 3 + 1
    assert set(depth) == set(docs.paths())
    assert max(depth.values()) == 2


def test_breadth_first_crawl_at_the_default_size_finds_2021_pages() -> None:
    with running_demo_site(books=20) as site:
        depth = _breadth_first(site, limit=5000)
    assert len(depth) == 2000 + 20 + 1
    assert max(depth.values()) <= 4


def test_docs_pages_answer_304_to_their_validators_and_gzip_when_accepted(
    docs300: RunningDemoSite, docs_client: httpx.Client
) -> None:
    path = docs300.catalogue.docs.plan.pages[42].path
    first = docs_client.get(path, headers={"Accept-Encoding": "identity"})
    assert first.status_code == 200
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert etag.startswith('"')
    assert not etag.startswith('W/"')
    again = docs_client.get(path, headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.headers["etag"] == etag
    assert again.content == b""
    assert docs_client.get(path, headers={"If-Modified-Since": modified}).status_code == 304
    assert docs_client.get(path, headers={"If-None-Match": '"other"'}).status_code == 200
    zipped = docs_client.get(path, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["etag"] == etag
    assert zipped.content == first.content  # httpx decoded it
    assert int(zipped.headers["content-length"]) < len(first.content) // 2


def test_fragment_and_highlight_variants_serve_the_same_page(
    docs300: RunningDemoSite, docs_client: httpx.Client
) -> None:
    path = docs300.catalogue.docs.plan.pages[7].path
    plain = docs_client.get(path)
    highlighted = docs_client.get(path, params={"highlight": "retry"})
    assert highlighted.status_code == 200
    assert (highlighted.headers["etag"], highlighted.content) == (plain.headers["etag"], plain.content)
    assert docs_client.get("/docs/").headers["location"] == INDEX
    assert docs_client.get("/docs").status_code == 301
    assert docs_client.get("/docs/getting-started/no-such-page.html").status_code == 404
    assert docs_client.get("/docs/no-such-section/index.html").status_code == 404


def test_docs_pages_get_the_sites_faults_and_latency() -> None:
    with running_demo_site(books=20, docs_pages=120, fail_503_fraction=1.0, latency_ms=30) as site:
        with closing(http.client.HTTPConnection(site.site.host, site.port, timeout=10)) as connection:
            started = time.perf_counter()
            assert _fetch(connection, INDEX)[0] == 503
            assert time.perf_counter() - started >= 0.03
        assert site.stats.count(INDEX) == 1


def test_new_version_rewrites_the_changed_fraction_and_keeps_the_rest_byte_identical() -> None:
    old = Catalogue(books=20, docs_pages=300, version=1, changed_fraction=0.1).docs
    new = Catalogue(books=20, docs_pages=300, version=2, changed_fraction=0.1).docs
    changed = new.changed_paths
    assert len(changed) == 30
    for path in old.paths():
        before, after = old.get(path), new.get(path)
        assert before is not None
        assert after is not None
        if path in changed:
            assert before.etag != after.etag
            assert after.last_modified > before.last_modified
        else:
            assert (before.body, before.etag, before.last_modified) == (after.body, after.etag, after.last_modified)
    assert DocsSite(pages=300, changed_fraction=0.5).changed_paths == frozenset()


def test_revisit_after_a_version_change_gets_304_except_for_changed_pages() -> None:
    with running_demo_site(books=20, docs_pages=300, version=1, changed_fraction=0.05) as site:
        paths = list(site.catalogue.docs.paths())
        with closing(http.client.HTTPConnection(site.site.host, site.port, timeout=10)) as connection:
            etags = {path: _fetch(connection, path)[1] for path in paths}
            docs = site.set_catalogue(books=20, docs_pages=300, version=2, changed_fraction=0.05).docs
            revisit = {path: _fetch(connection, path, {"If-None-Match": etags[path]}) for path in paths}
    modified = {path for path, (status, _) in revisit.items() if status == 200}
    assert modified == docs.changed_paths
    assert len(modified) == 15
    assert all(revisit[p] == (304, etags[p]) for p in paths if p not in modified)
    assert all(revisit[p][1] != etags[p] for p in modified)


def test_same_arguments_give_same_docs_bytes() -> None:
    one, two, other = DocsSite(pages=120, seed=3), DocsSite(pages=120, seed=3), DocsSite(pages=120, seed=4)
    assert list(one.paths()) == list(two.paths())
    for path in one.paths():
        assert _body(one, path) == _body(two, path)
    assert [p.title for p in one.plan.pages] != [p.title for p in other.plan.pages]
    with pytest.raises(ValueError, match="docs_pages"):
        Catalogue(docs_pages=0)


def test_demo_docs_spec_extracts_each_article_and_follows_only_query_free_docs_links() -> None:
    spec = load_spec(SPEC, named_after_file=True)
    assert list(spec.seeds.iter_urls()) == [f"{SPEC_ORIGIN}{INDEX}"]
    assert spec.follow.max_pages >= 2021
    extractor = extractor_for(spec)
    docs = DocsSite(pages=300)
    article = docs.plan.pages[123]
    url = SPEC_ORIGIN + article.path
    result = extractor.extract(url, _body(docs, article.path))
    assert [r.data for r in result.records] == [
        {"url": url, "title": article.title, "section": article.section.name, "last_updated": "2024-01-01"}
    ]
    assert result.records[0].key == url
    assert len(result.links) >= 200
    assert all(link.startswith(f"{SPEC_ORIGIN}/docs/") and "?" not in link for link in result.links)
    assert result.out_of_scope >= 2, "the shop link and the ?highlight= links are left out"
    index = extractor.extract(SPEC_ORIGIN + INDEX, _body(docs, INDEX))
    assert index.records == []
    assert {urlsplit(link).path for link in index.links} >= {s.path for s in docs.plan.sections}

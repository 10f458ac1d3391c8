"""The demo site's sitemaps: an index of a plain and a gzipped child, lastmod moving with the versions."""

from __future__ import annotations

import gzip
import re
import time

import httpx

from sluice_tools.demosite import Catalogue, RunningDemoSite
from sluice_tools.demosite.config import DEMO_TOKEN
from sluice_tools.demosite.page import version_time
from sluice_tools.demosite.sitemaps import w3c

LOC = re.compile(r"<loc>([^<]+)</loc><lastmod>([^<]+)</lastmod>")


def entries(body: bytes) -> dict[str, str]:
    return dict(LOC.findall(body.decode()))


def test_the_index_lists_a_plain_and_a_gzipped_sitemap_of_every_listing_and_book(
    client: httpx.Client, site: RunningDemoSite
) -> None:
    base, catalogue = site.base_url, site.catalogue
    index = client.get("/sitemap-index.xml")
    assert index.headers["content-type"] == "application/xml; charset=utf-8"
    assert "<sitemapindex " in index.text
    assert set(entries(index.content)) == {f"{base}/sitemaps/listings.xml", f"{base}/sitemaps/books.xml.gz"}

    listings = client.get("/sitemaps/listings.xml")
    assert set(entries(listings.content)) == {base + catalogue.listing_path(n) for n in range(1, 11)}

    books = client.get("/sitemaps/books.xml.gz", headers={"Accept-Encoding": "gzip"})
    assert books.headers["content-type"] == "application/x-gzip"
    assert "content-encoding" not in books.headers  # a gzip file, not a gzipped answer
    assert set(entries(gzip.decompress(books.content))) == {base + catalogue.detail_path(b) for b in catalogue.books}
    assert client.get("/sitemaps/nothing.xml").status_code == 404


def test_lastmod_moves_to_the_publication_of_the_version_that_changed_the_page() -> None:
    base = "http://127.0.0.1:9"
    old = Catalogue(books=100)
    published = time.time()
    new = Catalogue(books=100, version=1, changed_fraction=0.02, published=published)
    changed = [b for b in new.books if b.changed_in == 1]
    assert len(changed) == 2

    def books(catalogue: Catalogue) -> dict[str, str]:
        page = catalogue.sitemap(base, "/sitemaps/books.xml.gz")
        assert page is not None
        return entries(gzip.decompress(page.body))

    before, after = books(old), books(new)
    moved = {url for url in after if after[url] != before[url]}
    assert moved == {base + new.detail_path(b) for b in changed}
    assert {after[url] for url in moved} == {w3c(published)}
    assert set(before.values()) == {w3c(version_time(0))}  # long before any run

    listings = new.sitemap(base, "/sitemaps/listings.xml")
    assert listings is not None
    moved_listings = {u for u, at in entries(listings.body).items() if at == w3c(published)}
    assert moved_listings == {base + new.listing_path((b.id - 1) // 20 + 1) for b in changed}
    index = new.sitemap(base, "/sitemap-index.xml")
    assert index is not None
    assert set(entries(index.body).values()) == {w3c(published)}


def test_test_sitemaps_nest_break_and_bomb(client: httpx.Client, site: RunningDemoSite) -> None:
    nest = client.get("/_test/sitemap-nest/2").text
    assert f"<loc>{site.base_url}/_test/sitemap-nest/1</loc>" in nest
    assert "<sitemapindex " in nest
    assert f"<loc>{site.base_url}/catalogue/page-1.html</loc>" in client.get("/_test/sitemap-nest/0").text
    assert client.get("/_test/sitemap-bad?kind=doctype").text.count("<!DOCTYPE urlset [") == 1
    bomb = client.get("/_test/sitemap-bomb?bytes=100000")
    assert bomb.headers["content-type"] == "application/x-gzip"
    assert gzip.decompress(bomb.content) == bytes(100_000)


def test_the_sitemaps_behind_a_door_list_the_pages_behind_it(client: httpx.Client, site: RunningDemoSite) -> None:
    assert client.get("/members/sitemap-index.xml").status_code == 403
    index = client.get("/members/sitemap-index.xml", headers={"X-Demo-Token": DEMO_TOKEN})
    assert set(entries(index.content)) == {
        f"{site.base_url}/members/sitemaps/listings.xml",
        f"{site.base_url}/members/sitemaps/books.xml.gz",
    }
    listings = client.get("/members/sitemaps/listings.xml", headers={"X-Demo-Token": DEMO_TOKEN})
    assert f"{site.base_url}/members/catalogue/page-1.html" in entries(listings.content)

"""The catalogue over real HTTP: validators, gzip, redirects, robots, keep-alive, lifecycle."""

from __future__ import annotations

import asyncio
import gzip
import re
import socket

import httpx
import pytest

from sluice_tools.demosite import Catalogue, DemoSite, DemoSiteConfig, RunningDemoSite

LISTING = "/catalogue/page-1.html"
IDENTITY = {"Accept-Encoding": "identity"}


def test_listing_served_as_utf8_html(client: httpx.Client, site: RunningDemoSite) -> None:
    response = client.get(LISTING, headers=IDENTITY)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "content-encoding" not in response.headers
    page = site.catalogue.get(LISTING)
    assert page is not None
    assert response.content == page.body
    assert response.headers["etag"] == page.etag
    assert response.headers["last-modified"] == "Mon, 01 Jan 2024 00:00:00 GMT"


def test_home_redirects_to_first_listing_page(client: httpx.Client) -> None:
    for path in ("/", "/index.html"):
        response = client.get(path)
        assert response.status_code == 301
        assert response.headers["location"] == LISTING


def test_if_none_match_gives_304(client: httpx.Client) -> None:
    etag = client.get(LISTING).headers["etag"]
    response = client.get(LISTING, headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == etag
    assert client.get(LISTING, headers={"If-None-Match": f'"nope", W/{etag}'}).status_code == 304
    assert client.get(LISTING, headers={"If-None-Match": '"other"'}).status_code == 200


def test_if_modified_since_gives_304(client: httpx.Client) -> None:
    last_modified = client.get(LISTING).headers["last-modified"]
    assert client.get(LISTING, headers={"If-Modified-Since": last_modified}).status_code == 304
    older = {"If-Modified-Since": "Sun, 31 Dec 2023 00:00:00 GMT"}
    assert client.get(LISTING, headers=older).status_code == 200
    assert client.get(LISTING, headers={"If-Modified-Since": "garbage"}).status_code == 200


def test_gzip_when_accepted(client: httpx.Client, site: RunningDemoSite) -> None:
    with client.stream("GET", LISTING, headers={"Accept-Encoding": "gzip"}) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["vary"] == "Accept-Encoding"
    assert int(response.headers["content-length"]) == len(raw) < 20_000
    page = site.catalogue.get(LISTING)
    assert page is not None
    assert gzip.decompress(raw) == page.body
    refused = client.get(LISTING, headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers


def test_robots_and_private_pages(site: RunningDemoSite, client: httpx.Client) -> None:
    robots = client.get("/robots.txt")
    sitemaps = f"\nSitemap: {site.base_url}/sitemap-index.xml\nSitemap: {site.base_url}/sitemap.xml\n"
    assert robots.text == "User-agent: *\nDisallow: /private/\n" + sitemaps
    assert robots.headers["content-type"].startswith("text/plain")
    site.set_config(crawl_delay=2)
    assert client.get("/robots.txt").text == "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n" + sitemaps
    assert client.get("/private/staff.html").status_code == 200
    assert b"/private/staff.html" in client.get(LISTING).content


def test_sitemap_uses_request_host(client: httpx.Client, site: RunningDemoSite) -> None:
    body = client.get("/sitemap.xml").text
    assert f"<loc>{site.base_url}/catalogue/page-10.html</loc>" in body


def test_detail_404_and_method_not_allowed(client: httpx.Client, site: RunningDemoSite) -> None:
    book = site.catalogue.books[5]
    assert client.get(site.catalogue.detail_path(book)).status_code == 200
    assert client.get("/catalogue/nothing_999999/index.html").status_code == 404
    assert client.post(LISTING).status_code == 405


def test_head_has_length_but_no_body(client: httpx.Client) -> None:
    response = client.head(LISTING, headers=IDENTITY)
    assert response.status_code == 200
    assert int(response.headers["content-length"]) > 40_000
    assert response.content == b""


def test_new_version_changes_only_affected_etags(site: RunningDemoSite, client: httpx.Client) -> None:
    catalogue = Catalogue(books=200, version=0, changed_fraction=0.05)
    site.set_catalogue(catalogue)
    before = {n: client.get(f"/catalogue/page-{n}.html").headers["etag"] for n in range(1, 11)}
    new = site.set_catalogue(books=200, version=1, changed_fraction=0.05)
    pages_changed = {(book_id - 1) // 20 + 1 for book_id in new.changed_ids}
    for n, etag in before.items():
        response = client.get(f"/catalogue/page-{n}.html", headers={"If-None-Match": etag})
        assert response.status_code == (200 if n in pages_changed else 304), n


def _raw_exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        chunks = []
        for _ in range(10_000):
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def test_pipelined_requests_answer_in_order(site: RunningDemoSite) -> None:
    payload = (
        b"GET /_test/status/201 HTTP/1.1\r\nHost: a\r\n\r\n"
        b"GET /_test/slow?seconds=0.05&bytes=10 HTTP/1.1\r\nHost: a\r\n\r\n"
        b"GET /_test/status/202 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    )
    data = _raw_exchange(site.port, payload)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", data)
    assert statuses == [b"201", b"200", b"202"]
    assert data.endswith(b"</p></body></html>\n")


def test_malformed_request_gets_400(site: RunningDemoSite) -> None:
    assert _raw_exchange(site.port, b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400 ")


def test_http10_without_keep_alive_is_closed(site: RunningDemoSite) -> None:
    data = _raw_exchange(site.port, b"GET /robots.txt HTTP/1.0\r\n\r\n")
    assert b"Connection: close" in data
    assert data.endswith(b"/sitemap.xml\n")  # the last line of robots.txt


def test_async_api_start_stop() -> None:
    async def scenario() -> tuple[int, str]:
        site = DemoSite(DemoSiteConfig(), Catalogue(books=20))
        port = await site.start()
        try:
            async with httpx.AsyncClient(base_url=site.base_url, trust_env=False) as client:
                response = await client.get("/robots.txt")
        finally:
            await site.stop()
        return port, response.text

    port, text = asyncio.run(scenario())
    assert port > 0
    assert "Disallow: /private/" in text
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_refuses_non_loopback_host() -> None:
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(DemoSite().start(host="0.0.0.0"))  # noqa: S104 - refusal under test

"""The fixed /_test/ endpoints."""

from __future__ import annotations

import email.utils
import zlib

import httpx
import pytest

from sluice_tools.demosite import RunningDemoSite


def test_status(client: httpx.Client) -> None:
    assert client.get("/_test/status/418").status_code == 418
    assert client.get("/_test/status/503").status_code == 503
    assert client.get("/_test/status/99").status_code == 400
    assert client.get("/_test/unknown").status_code == 404


def test_flaky_fails_n_times_per_key_then_succeeds(client: httpx.Client, site: RunningDemoSite) -> None:
    statuses = [client.get("/_test/flaky/a?fail=2&status=500").status_code for _ in range(4)]
    assert statuses == [500, 500, 200, 200]
    assert client.get("/_test/flaky/b?fail=1").status_code == 503
    site.reset()
    assert client.get("/_test/flaky/a?fail=2").status_code == 503


def test_retry_after_delta_then_ok(client: httpx.Client) -> None:
    first = client.get("/_test/retry-after/k?seconds=3")
    assert first.status_code == 429
    assert first.headers["retry-after"] == "3"
    assert client.get("/_test/retry-after/k?seconds=3").status_code == 200


def test_retry_after_http_date(client: httpx.Client) -> None:
    first = client.get("/_test/retry-after/d?seconds=120&form=date")
    assert first.status_code == 429
    when = email.utils.parsedate_to_datetime(first.headers["retry-after"])
    now = email.utils.parsedate_to_datetime(first.headers["date"])
    assert 119 <= (when - now).total_seconds() <= 121


def test_redirect_to_any_url_is_not_followed_here(client: httpx.Client) -> None:
    response = client.get("/_test/redirect", params={"to": "http://169.254.169.254/latest/meta-data"})
    assert response.status_code == 302
    assert response.headers["location"] == "http://169.254.169.254/latest/meta-data"
    evil = client.get("/_test/redirect", params={"to": "/x\r\nSet-Cookie: a=b", "status": "307"})
    assert evil.status_code == 307
    assert "set-cookie" not in evil.headers


def test_redirect_loop_and_chain(client: httpx.Client) -> None:
    assert client.get("/_test/redirect-loop/3").headers["location"] == "/_test/redirect-loop/4"
    assert client.get("/_test/redirect-loop/1?cycle=2").headers["location"] == "/_test/redirect-loop/0?cycle=2"
    with pytest.raises(httpx.TooManyRedirects):
        client.get("/_test/redirect-loop/0", follow_redirects=True)
    final = client.get("/_test/redirect-chain/3", follow_redirects=True)
    assert final.status_code == 200
    assert len(final.history) == 3


@pytest.mark.parametrize("length", ["1", "0"])
def test_big_body_streamed(client: httpx.Client, length: str) -> None:
    size = 3 * 1024 * 1024 + 17
    with client.stream("GET", "/_test/big", params={"bytes": size, "length": length}) as response:
        received = sum(len(chunk) for chunk in response.iter_raw())
    assert received == size
    if length == "1":
        assert response.headers["content-length"] == str(size)
    else:
        assert "content-length" not in response.headers
        assert response.headers["transfer-encoding"] == "chunked"


def test_gzip_bomb_is_tiny_and_inflates(client: httpx.Client) -> None:
    size = 50 * 1024 * 1024
    with client.stream("GET", "/_test/gzip-bomb", params={"bytes": size}) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert len(raw) < size // 500
    inflater = zlib.decompressobj(31)
    inflated = 0
    chunk = inflater.decompress(raw, 1 << 20)
    while chunk:
        inflated += len(chunk)
        chunk = inflater.decompress(inflater.unconsumed_tail, 1 << 20)
    assert inflated == size
    assert inflater.eof


def test_slow_body_arrives_in_pieces(client: httpx.Client) -> None:
    with client.stream("GET", "/_test/slow", params={"seconds": "0.2", "bytes": "1000"}) as response:
        assert response.status_code == 200
        chunks = [chunk for chunk in response.iter_raw() if chunk]
    assert sum(map(len, chunks)) == 1000
    assert len(chunks) > 1


def test_reset_aborts_after_headers(client: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/_test/reset")


def test_cp1252_declared_only_in_meta(client: httpx.Client) -> None:
    response = client.get("/_test/cp1252")
    assert response.headers["content-type"] == "text/html"
    with pytest.raises(UnicodeDecodeError):
        response.content.decode("utf-8")
    text = response.content.decode("cp1252")
    assert 'content="text/html; charset=windows-1252"' in text
    assert all(ch in text for ch in "é€’")


def test_broken_empty_and_json(client: httpx.Client) -> None:
    broken = client.get("/_test/broken-html")
    assert broken.status_code == 200
    assert b"product_pod" in broken.content
    empty = client.get("/_test/empty")
    assert (empty.status_code, empty.content, empty.headers["content-length"]) == (200, b"", "0")
    data = client.get("/_test/json")
    assert data.headers["content-type"] == "application/json"
    assert data.json()["ok"] is True


def test_etag_endpoint_is_stable_and_conditional(client: httpx.Client) -> None:
    first = client.get("/_test/etag/k1")
    etag = first.headers["etag"]
    assert client.get("/_test/etag/k1").headers["etag"] == etag
    assert client.get("/_test/etag/k2").headers["etag"] != etag
    assert client.get("/_test/etag/k1", headers={"If-None-Match": etag}).status_code == 304
    since = {"If-Modified-Since": first.headers["last-modified"]}
    assert client.get("/_test/etag/k1", headers=since).status_code == 304


def test_headers_echo(client: httpx.Client) -> None:
    echoed = client.get("/_test/headers", headers={"User-Agent": "sluice-test/1"}).json()
    assert echoed["user-agent"] == "sluice-test/1"

"""parse_target gives the URL httpx gives, for canonical URLs (short path) and everything else (httpx's path)."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from sluice.domain.hosts import host_key
from sluice.fetch.target import _SIMPLE, parse_target, target_host

CASES = [
    "http://127.0.0.1:8710/catalogue/page-1.html",
    "https://example.com/",
    "https://example.com/a/b?x=1&y=%20z",
    "https://example.com/a?q=/path?more",
    "http://example.com:80/default-port",
    "https://example.com:443/default-port",
    "https://example.com:8443/",
    "https://example.com:99999/",
    "https://Example.COM/Upper",
    "HTTPS://example.com/",
    "https://user:secret@example.com/private",
    "https://example.com/a/./b/../c",
    "https://example.com/.well-known/robots.txt",
    "https://example.com/%zz",
    "https://example.com/a b",
    "https://example.com/caf\u00e9",
    "https://xn--caf-dma.example/",
    "https://caf\u00e9.example/",
    "http://[::1]:8080/v6",
    "https://example.com/frag#part",
    "https://example.com/q?",
    "https://example.com./trailing-dot",
    "https://a..b/",
    "ftp://example.com/file",
    'https://example.com/a"quote',
    "https://example.com/%7Euser/%41",
    "https://example.com/[brackets]",
    "https://example.com?no-path",
    "https://example.com",
]


def _same(text: str) -> None:
    try:
        want = httpx.URL(text)
    except httpx.InvalidURL:
        with pytest.raises(httpx.InvalidURL):
            parse_target(text)
        return
    got = parse_target(text)
    assert str(got) == str(want)
    assert got == want
    for name in ("scheme", "host", "port", "raw_host", "raw_path", "netloc", "userinfo", "fragment", "query"):
        assert getattr(got, name) == getattr(want, name), (text, name)
    assert target_host(got) == host_key(str(want))


@pytest.mark.parametrize("text", CASES)
def test_the_same_url_as_httpx(text: str) -> None:
    _same(text)


def test_the_same_url_as_httpx_on_random_urls() -> None:
    rng = random.Random(18)
    alphabet = "abcXYZ019-._~!$&'()*+,;=:@/?%#[] \u00e9\t"
    for _ in range(3000):
        host = rng.choice(["example.com", "127.0.0.1", "a-b.c", "EXAMPLE.com", "x"])
        port = rng.choice(["", ":80", ":443", ":8080", ":0"])
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24)))
        _same(f"{rng.choice(['http', 'https'])}://{host}{port}/{tail}")


def test_the_short_path_builds_no_url_text_again() -> None:
    url = parse_target("http://127.0.0.1:8710/catalogue/page-1.html?x=1")
    assert url.host == "127.0.0.1"
    assert url.port == 8710
    assert url.raw_path == b"/catalogue/page-1.html?x=1"


_PCHAR_ONE_BY_ONE = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_ONE_BY_ONE = re.compile(
    r"(?P<scheme>https?)://(?P<host>[a-z0-9](?:[a-z0-9.\-]{0,251}[a-z0-9])?)(?::(?P<port>[1-9][0-9]{0,4}))?"
    rf"(?P<path>/(?:{_PCHAR_ONE_BY_ONE}|/)*)(?:\?(?P<query>(?:{_PCHAR_ONE_BY_ONE}|[/?])*))?"
)
"""The short path's pattern before it took runs of safe characters possessively (one character at a time)."""


def test_the_short_path_takes_the_urls_it_took_one_character_at_a_time() -> None:
    rng = random.Random(31)
    alphabet = "abcXYZ019-._~!$&'()*+,;=:@/?%#[] \u00e9\tAF"
    for _ in range(5000):
        host = rng.choice(["example.com", "127.0.0.1", "a-b.c", "EXAMPLE.com", "x", "a.", "-a"])
        port = rng.choice(["", ":80", ":8080", ":0", ":123456"])
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        text = f"{rng.choice(['http', 'https', 'HTTP'])}://{host}{port}/{tail}"
        old, new = _ONE_BY_ONE.fullmatch(text), _SIMPLE.fullmatch(text)
        assert (old is None) == (new is None), text
        if old is not None and new is not None:
            assert old.groupdict() == new.groupdict(), text

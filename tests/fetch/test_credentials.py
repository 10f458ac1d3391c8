"""What a crawl's requests carry: headers, cookies and basic auth sent, kept to the spec's origins, proxied."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from sluice.domain.secrets import Secret, SecretUnavailable
from sluice.fetch import AddressGuard, Failed, Fetched, PageFetcher, Skipped
from sluice.fetch.credentials import RequestCredentials, resolve_request
from sluice.spec import Politeness, RequestSpec
from sluice.spec.request import Origin

pytestmark = pytest.mark.anyio
Respond = Callable[..., httpx.Response]

TOKEN = "test-token-not-a-secret"
SESSION = "test-session-not-a-secret"
PASSWORD = "test-password-not-a-secret"
PROXY_PASSWORD = "test-proxy-password"
SECRETS = {
    "demo/token": TOKEN,
    "demo/session": SESSION,
    "ssm:/demo/password": PASSWORD,
    "demo/proxy": f"http://crawler:{PROXY_PASSWORD}@127.0.0.1:{{port}}",
}
SECTION = {
    "headers": {"Accept-Language": "en-GB", "X-Demo-Token": {"secret": "demo/token"}},
    "cookies": {"consent": "yes", "demo_session": {"secret": "demo/session"}},
    "basic_auth": {"username": "reader", "password": {"secret": "ssm:/demo/password"}},
}
ORIGINS: frozenset[Origin] = frozenset({("https", "example.com", 443)})
"""The origins the spec names: https on its default port, nothing else of the host."""
PLAIN = frozenset({("http", "example.com", 80)})
BASIC = "Basic " + base64.b64encode(f"reader:{PASSWORD}".encode()).decode()


def read(secrets: dict[str, str]) -> Callable[[str], Secret]:
    def reader(name: str) -> Secret:
        if name not in secrets:
            raise SecretUnavailable(name, "not set")
        return Secret(secrets[name])

    return reader


def credentials(
    section: dict[str, Any] = SECTION, secrets: dict[str, str] = SECRETS, origins: frozenset[Origin] = ORIGINS
) -> RequestCredentials:
    return resolve_request(RequestSpec.model_validate(section), origins, read(secrets))


def fetcher_on(
    handler: Callable[[httpx.Request], httpx.Response], creds: RequestCredentials, *, obey_robots: bool = False
) -> PageFetcher:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    politeness = Politeness(obey_robots=obey_robots, timeout_seconds=5)
    return PageFetcher(
        politeness,
        transport=httpx.MockTransport(handler),
        guard=AddressGuard(resolver=resolver),
        credentials=creds,
    )


async def test_headers_cookies_and_basic_auth_are_sent_to_the_specs_origins(respond: Respond) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return respond()

    async with fetcher_on(handler, credentials()) as fetcher:
        outcome = await fetcher.fetch("https://example.com/members/page-1.html")
        await fetcher.fetch("https://EXAMPLE.com.:443/basket")  # the same origin, spelled otherwise
    assert isinstance(outcome, Fetched)
    assert len(seen) == 2
    for headers in seen:
        assert headers["accept-language"] == "en-GB"
        assert headers["x-demo-token"] == TOKEN
        assert headers["cookie"] == f"consent=yes; demo_session={SESSION}"
        assert headers["authorization"] == BASIC
        assert headers["user-agent"].startswith("Sluice/")  # the fetcher's own head is still its own


@pytest.mark.parametrize(
    "location",
    [
        "https://other.example/landing",  # another host
        "http://example.com/members/page-2.html",  # the same host, stepping down to plain http
        "https://example.com:8443/members/page-2.html",  # the same host, another port
        "https://shop.example.com/basket",  # a subdomain
    ],
)
async def test_a_redirect_off_the_specs_origins_carries_no_credentials(respond: Respond, location: str) -> None:
    seen: dict[str, httpx.Headers] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[str(request.url)] = request.headers
        if request.url.path == "/start":
            return respond(302, b"", {"location": location})
        if str(request.url) != "https://example.com/back" and request.url.path != "/start":
            return respond(302, b"", {"location": "https://example.com/back"})
        return respond()

    async with fetcher_on(handler, credentials()) as fetcher:
        outcome = await fetcher.fetch("https://example.com/start")
    assert isinstance(outcome, Fetched)
    assert "authorization" in seen["https://example.com/start"]
    after = [headers for url, headers in seen.items() if url != "https://example.com/start"]
    assert after
    for headers in after:  # once the chain left, none come back (as httpx does for Authorization)
        assert {"authorization", "cookie", "x-demo-token"}.isdisjoint(headers)
        assert headers["accept-language"] == "en-GB"  # a literal header is no credential: it goes on


async def test_a_redirect_on_the_same_host_keeps_them(respond: Respond) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        if request.url.path == "/start":
            return respond(301, b"", {"location": "/members/page-1.html"})
        return respond()

    async with fetcher_on(handler, credentials()) as fetcher:
        assert isinstance(await fetcher.fetch("https://example.com/start"), Fetched)
    assert [h["authorization"] for h in seen] == [BASIC, BASIC]


@pytest.mark.parametrize(
    "url",
    [
        "https://other.example/",  # another host
        "http://example.com/members/page-1.html",  # plain http beside the https origin: in clear text
        "https://example.com:8443/members/page-1.html",  # another port
        "https://shop.example.com/basket",  # a subdomain
    ],
)
async def test_a_page_of_an_origin_the_spec_does_not_name_gets_none(respond: Respond, url: str) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return respond()

    async with fetcher_on(handler, credentials()) as fetcher:
        assert isinstance(await fetcher.fetch(url), Fetched)
    assert {"authorization", "cookie", "x-demo-token"}.isdisjoint(seen[0])
    assert seen[0]["accept-language"] == "en-GB"


async def test_a_plain_http_origin_gets_them_only_when_the_spec_names_it(respond: Respond) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return respond()

    async with fetcher_on(handler, credentials(origins=ORIGINS | PLAIN)) as fetcher:
        await fetcher.fetch("http://example.com/members/page-1.html")
    assert seen[0]["authorization"] == BASIC


async def test_an_https_redirect_down_to_a_named_http_origin_still_carries_none(respond: Respond) -> None:
    seen: dict[str, httpx.Headers] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[str(request.url)] = request.headers
        if request.url.path == "/start":
            return respond(302, b"", {"location": "http://example.com/landing"})
        return respond()

    async with fetcher_on(handler, credentials(origins=ORIGINS | PLAIN)) as fetcher:
        assert isinstance(await fetcher.fetch("https://example.com/start"), Fetched)
    assert "authorization" not in seen["http://example.com/landing"]


async def test_robots_txt_of_another_port_is_asked_without_them(respond: Respond) -> None:
    seen: dict[str, httpx.Headers] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[f"{request.url.port}{request.url.path}"] = request.headers
        return respond(body=b"User-agent: *\nAllow: /\n", headers={"content-type": "text/plain"})

    async with fetcher_on(handler, credentials(), obey_robots=True) as fetcher:
        await fetcher.fetch("https://example.com:8443/members/page-1.html")
    assert {"authorization", "cookie", "x-demo-token"}.isdisjoint(seen["8443/robots.txt"])
    assert {"authorization", "cookie", "x-demo-token"}.isdisjoint(seen["8443/members/page-1.html"])


async def test_robots_txt_of_a_protected_host_is_asked_with_the_credentials(respond: Respond) -> None:
    seen: dict[str, httpx.Headers] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = request.headers
        return respond(body=b"User-agent: *\nAllow: /\n", headers={"content-type": "text/plain"})

    async with fetcher_on(handler, credentials(), obey_robots=True) as fetcher:
        await fetcher.fetch("https://example.com/members/page-1.html")
    assert seen["/robots.txt"]["authorization"] == BASIC


def test_credentials_never_show_in_a_repr() -> None:
    creds = credentials(
        {**SECTION, "proxy": {"secret": "demo/proxy"}}, {**SECRETS, "demo/proxy": SECRETS["demo/proxy"].format(port=1)}
    )
    shown = repr(creds) + str(creds) + repr(creds.proxy)
    for value in (TOKEN, SESSION, PASSWORD, PROXY_PASSWORD, BASIC.split()[1]):
        assert value not in shown
    assert "********" in shown
    assert "Accept-Language" in shown  # literal headers are no secret


@pytest.mark.parametrize(
    ("secret", "value", "why"),
    [
        ("demo/token", "one\r\nX-Injected: two", "its value holds a line break"),
        ("demo/session", "has a space", "its value is not a cookie value"),
        ("demo/proxy", "socks5://proxy.example:1080", "its value is not an http:// or https:// URL"),
    ],
)
def test_a_secret_that_cannot_go_where_the_spec_puts_it_is_refused_by_name(secret: str, value: str, why: str) -> None:
    section = {**SECTION, "proxy": {"secret": "demo/proxy"}}
    secrets = {**SECRETS, "demo/proxy": "http://proxy.example:3128", secret: value}
    with pytest.raises(SecretUnavailable) as caught:
        credentials(section, secrets)
    assert caught.value.name == secret
    assert why in str(caught.value)
    assert value not in str(caught.value)


def test_a_missing_secret_is_named() -> None:
    with pytest.raises(SecretUnavailable, match="secret 'ssm:/demo/password' unavailable: not set"):
        credentials(SECTION, {k: v for k, v in SECRETS.items() if k != "ssm:/demo/password"})


def test_a_proxy_needs_the_fetchers_own_transport(respond: Respond) -> None:
    creds = credentials({"proxy": "http://proxy.example:3128"})
    with pytest.raises(ValueError, match="a proxy needs the fetcher's own transport"):
        fetcher_on(lambda _: respond(), creds)


@asynccontextmanager
async def forward_proxy() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A forward proxy on loopback that answers itself, recording each request head it receives."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        if heads[-1].startswith(b"CONNECT "):  # no tunnel here: refused, as a proxy refuses a CONNECT it won't make
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        body = b"<p>through the proxy</p>"
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1]), heads
    finally:
        server.close()
        await server.wait_closed()


async def test_every_request_goes_through_the_proxy_with_its_credentials() -> None:
    async with forward_proxy() as (port, heads):
        creds = credentials(
            {**SECTION, "proxy": {"secret": "demo/proxy"}},
            {**SECRETS, "demo/proxy": SECRETS["demo/proxy"].format(port=port)},
            PLAIN,
        )

        async def resolver(host: str, port: int) -> list[str]:
            return ["93.184.216.34"]  # the target's own address is still checked (the proxy is on loopback)

        guard = AddressGuard(allow_loopback=True, resolver=resolver)
        politeness = Politeness(obey_robots=False, timeout_seconds=5)
        async with PageFetcher(politeness, guard=guard, credentials=creds) as fetcher:
            outcome = await fetcher.fetch("http://example.com/members/page-1.html")
    assert isinstance(outcome, Fetched), outcome
    assert outcome.body == b"<p>through the proxy</p>"
    (head,) = heads
    lines = head.decode("latin-1").lower().split("\r\n")
    assert lines[0] == "get http://example.com/members/page-1.html http/1.1"  # absolute form: a proxied request
    proxy_auth = base64.b64encode(f"crawler:{PROXY_PASSWORD}".encode()).decode().lower()
    assert f"proxy-authorization: basic {proxy_auth}" in lines
    assert f"x-demo-token: {TOKEN}" in lines


async def test_an_https_page_is_tunnelled_and_only_the_connect_carries_the_proxys_credentials() -> None:
    async with forward_proxy() as (port, heads):
        creds = credentials(
            {**SECTION, "proxy": {"secret": "demo/proxy"}},
            {**SECRETS, "demo/proxy": SECRETS["demo/proxy"].format(port=port)},
        )

        async def resolver(host: str, port: int) -> list[str]:
            return ["93.184.216.34"]

        guard = AddressGuard(allow_loopback=True, resolver=resolver)
        politeness = Politeness(obey_robots=False, timeout_seconds=5, retry={"times": 0})
        async with PageFetcher(politeness, guard=guard, credentials=creds) as fetcher:
            outcome = await fetcher.fetch("https://example.com/members/page-1.html")
    assert isinstance(outcome, Failed)
    (head,) = heads
    lines = head.decode("latin-1").lower().split("\r\n")
    assert lines[0] == "connect example.com:443 http/1.1"
    assert any(line.startswith("proxy-authorization: basic ") for line in lines)
    assert not any(TOKEN in line or SESSION in line for line in lines)  # the site's credentials stay in the tunnel
    for value in (TOKEN, SESSION, PASSWORD, PROXY_PASSWORD):
        assert value not in repr(outcome)


async def test_a_proxy_is_checked_like_any_other_address() -> None:
    creds = credentials({"proxy": "http://10.0.0.7:3128"})

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    politeness = Politeness(obey_robots=False, timeout_seconds=5)
    async with PageFetcher(politeness, guard=AddressGuard(resolver=resolver), credentials=creds) as fetcher:
        outcome = await fetcher.fetch("http://example.com/")
    assert isinstance(outcome, Skipped)
    assert outcome.reason == "proxy refused: address 10.0.0.7 is private"

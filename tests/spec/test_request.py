"""The spec's request section: literals and references, and every credential written in the clear refused."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.domain.secrets import local_variable, name_problem
from sluice.spec import SecretRef, SpecError, parse_spec

BASE: dict[str, Any] = {
    "name": "members",
    "seeds": ["https://members.example/catalogue/page-1.html"],
    "extract": {"fields": {"title": "h1"}},
}
USE_A_REFERENCE = "name it by reference, {secret: NAME}"


def errors_of(request: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec({**BASE, "request": request})
    return caught.value.errors


def test_every_key_takes_a_literal_or_a_reference() -> None:
    spec = parse_spec(
        {
            **BASE,
            "request": {
                "headers": {"Accept-Language": "en-GB", "X-Demo-Token": {"secret": "sluice/demo/token"}},
                "cookies": {"consent": "yes", "demo_session": {"secret": "ssm:/sluice/demo/session"}},
                "basic_auth": {"username": "reader", "password": {"secret": "ssm:/sluice/demo/password"}},
                "proxy": "http://proxy.example:3128",
            },
        }
    )
    request = spec.request
    assert request.headers == {"Accept-Language": "en-GB", "X-Demo-Token": SecretRef(secret="sluice/demo/token")}
    assert request.basic_auth is not None
    assert request.basic_auth.username == "reader"
    assert request.secret_names() == ["sluice/demo/token", "ssm:/sluice/demo/session", "ssm:/sluice/demo/password"]
    assert request.configured


def test_a_spec_without_the_section_keeps_its_digest() -> None:
    """Specs written before the section existed: a changed digest would make their next run fetch every page."""
    spec = parse_spec(BASE)
    assert not spec.request.configured
    assert "request" not in spec.model_dump(exclude={"request"})
    assert spec.digest() == parse_spec({**BASE, "request": {}}).digest()
    with_header = parse_spec({**BASE, "request": {"headers": {"Accept-Language": "en"}}})
    assert with_header.digest() != spec.digest()


def test_the_digest_holds_references_not_values() -> None:
    spec = parse_spec({**BASE, "request": {"headers": {"X-Demo-Token": {"secret": "sluice/demo/token"}}}})
    assert spec.model_dump(mode="json")["request"]["headers"] == {"X-Demo-Token": {"secret": "sluice/demo/token"}}


@pytest.mark.parametrize(
    ("request_section", "where"),
    [
        ({"headers": {"Authorization": "Bearer not-a-real-token-0000"}}, "request.headers: Authorization:"),
        ({"headers": {"authorization": "anything at all"}}, "request.headers: authorization:"),
        ({"headers": {"X-Api-Key": "0000-test"}}, "request.headers: X-Api-Key:"),
        ({"headers": {"X-Auth-Token": "test"}}, "request.headers: X-Auth-Token:"),
        ({"headers": {"X-Forwarded-Thing": "Basic dGVzdDp0ZXN0"}}, "request.headers: X-Forwarded-Thing:"),
        ({"headers": {"X-Whatever": "0123456789abcdefABCDEF0123"}}, "request.headers: X-Whatever:"),
        ({"headers": {"X-Whatever": "eyJhbGciOi.eyJzdWIiOi.sig"}}, "request.headers: X-Whatever:"),
        ({"cookies": {"sessionid": "test"}}, "request.cookies: sessionid:"),
        ({"cookies": {"demo_session": "test"}}, "request.cookies: demo_session:"),
        ({"cookies": {"prefs": "0123456789abcdefABCDEF0123"}}, "request.cookies: prefs:"),
        ({"basic_auth": {"username": "reader", "password": "test-password"}}, "request.basic_auth.password:"),
        ({"basic_auth": {"username": "reader", "password": 1234}}, "request.basic_auth.password:"),
        ({"proxy": "http://user:test-password@proxy.example:3128"}, "request.proxy:"),
    ],
)
def test_a_literal_credential_is_refused_naming_the_field_and_the_fix(
    request_section: dict[str, Any], where: str
) -> None:
    (error,) = errors_of(request_section)
    assert error.startswith(where), error
    assert USE_A_REFERENCE in error
    assert local_variable("NAME") in error  # says what to set locally, too
    for literal in ("not-a-real-token-0000", "test-password", "0123456789abcdefABCDEF0123", "dGVzdDp0ZXN0"):
        assert literal not in error  # the refusal does not repeat the secret it refuses


def test_harmless_literals_are_accepted() -> None:
    spec = parse_spec(
        {
            **BASE,
            "request": {
                "headers": {"Accept-Language": "en-GB,en;q=0.8", "X-Requested-With": "sluice", "DNT": 1},
                "cookies": {"consent": "yes", "lang": "en"},
            },
        }
    )
    assert spec.request.headers["DNT"] == "1"


@pytest.mark.parametrize(
    ("request_section", "expected"),
    [
        (
            {"headers": {"User-Agent": "x"}},
            "request.headers: User-Agent: not a header a spec sets: set politeness.user_agent",
        ),
        (
            {"headers": {"Cookie": "a=b"}},
            "request.headers: Cookie: not a header a spec sets: give cookies in request.cookies",
        ),
        ({"headers": {"Host": "x"}}, "request.headers: Host: not a header a spec sets"),
        ({"headers": {"Accept-Encoding": "br"}}, "request.headers: Accept-Encoding: not a header a spec sets"),
        ({"headers": {"If-None-Match": "x"}}, "request.headers: If-None-Match: not a header a spec sets"),
        ({"headers": {"Bad Name": "x"}}, "request.headers: 'Bad Name' is not a header name"),
        ({"headers": {"X-A": "a\r\nX-Injected: 1"}}, "request.headers: X-A: the value holds a line break"),
        ({"headers": {"X-A": "a", "x-a": "b"}}, "request.headers: x-a: given twice"),
        ({"headers": {"X-A": True}}, "request.headers.X-A: a value is a string or a reference"),
        ({"headers": {"X-A": {"name": "x"}}}, "request.headers.X-A: a reference is {secret: NAME} (one key)"),
        ({"headers": {"X-A": {"secret": "a*"}}}, "request.headers.X-A: 'a*' is not a secret name"),
        ({"headers": {"X-A": {"secret": "ssm:/a//b"}}}, "request.headers.X-A: 'ssm:/a//b' is not an SSM parameter"),
        ({"cookies": {"lang": "en gb"}}, "request.cookies: lang: the value is not a cookie value"),
        ({"basic_auth": {"username": "a:b", "password": {"secret": "p"}}}, "request.basic_auth.username: a user name"),
        ({"basic_auth": {"username": "reader"}}, "request.basic_auth.password: required"),
        ({"proxy": "socks5://proxy.example:1080"}, "request.proxy: the proxy URL is not an http:// or https:// URL"),
        ({"proxy": "http://proxy.example:3128/path"}, "request.proxy: the proxy URL is a proxy's address only"),
        ({"proxy": "http://proxy.example:99999"}, "request.proxy: the proxy URL is not a URL"),
        (
            {
                "headers": {"Authorization": {"secret": "t"}},
                "basic_auth": {"username": "u", "password": {"secret": "p"}},
            },
            "request: give basic_auth or an Authorization header, not both",
        ),
        (
            {"headers": {"X-A": {"secret": "demo-token"}, "X-B": {"secret": "demo_token"}}},
            "request: secrets 'demo-token' and 'demo_token' are both SLUICE_SECRET_DEMO_TOKEN locally",
        ),
        ({"header": {}}, "request.header: unknown key"),
    ],
)
def test_every_mistake_is_named_by_its_path(request_section: dict[str, Any], expected: str) -> None:
    errors = errors_of(request_section)
    assert any(e.startswith(expected) for e in errors), errors


def test_a_secret_named_by_reference_may_be_any_header() -> None:
    spec = parse_spec({**BASE, "request": {"headers": {"Authorization": {"secret": "sluice/demo/bearer"}}}})
    assert spec.request.secret_names() == ["sluice/demo/bearer"]


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("sluice/demo/token", "SLUICE_SECRET_SLUICE_DEMO_TOKEN"),
        ("ssm:/sluice/demo/token", "SLUICE_SECRET_SLUICE_DEMO_TOKEN"),
        ("books.api-key@prod", "SLUICE_SECRET_BOOKS_API_KEY_PROD"),
    ],
)
def test_a_reference_is_one_environment_variable_locally(name: str, variable: str) -> None:
    assert name_problem(name) is None
    assert local_variable(name) == variable


TOKEN = {"headers": {"X-Demo-Token": {"secret": "sluice/demo/token"}}}


def test_credentials_go_to_the_seeds_origins_and_the_ones_the_spec_lists() -> None:
    spec = parse_spec(
        {
            **BASE,
            "seeds": ["https://members.example/a", "https://MEMBERS.example:443/b", "http://members.example:8080/c"],
            "request": {**TOKEN, "origins": ["https://shop.members.example", "http://members.example/"]},
        }
    )
    assert spec.credential_origins() == {
        ("https", "members.example", 443),
        ("http", "members.example", 8080),
        ("https", "shop.members.example", 443),
        ("http", "members.example", 80),
    }


@pytest.mark.parametrize(
    ("origins", "why"),
    [
        (
            ["https://members.example/path"],
            "request.origins: entry 1: 'https://members.example/path' is an origin only: scheme://host[:port], no path",
        ),
        (["ftp://members.example"], "request.origins: entry 1: 'ftp://members.example' is not an http:// or https://"),
        (["https://user@members.example"], "request.origins: entry 1: 'https://user@members.example' carries a user"),
        (["https://members.example:99999"], "request.origins: entry 1: 'https://members.example:99999' is not a URL"),
        (["https://members.example", "https://"], "request.origins: entry 2: 'https://' has no host"),
        (["https://elsewhere.example"], "request.origins: entry 1: 'https://elsewhere.example' is not on the crawl's"),
    ],
)
def test_an_origin_that_is_no_origin_of_the_crawl_is_refused_naming_it(origins: list[str], why: str) -> None:
    errors = errors_of({**TOKEN, "origins": origins})
    assert any(why in e for e in errors), errors


def test_origins_without_credentials_are_refused() -> None:
    errors = errors_of({"headers": {"Accept-Language": "en"}, "origins": ["https://members.example"]})
    assert any("origins says where credentials go, and the section has none" in e for e in errors), errors


def test_a_seed_file_crawl_with_credentials_lists_its_origins() -> None:
    seeded = {**BASE, "seeds": {"file": "seeds.txt"}, "follow": {"allowed_domains": ["members.example"]}}
    with pytest.raises(SpecError) as caught:
        parse_spec({**seeded, "request": TOKEN})
    assert any("request.origins: the seeds name no origin" in e for e in caught.value.errors), caught.value.errors
    spec = parse_spec({**seeded, "request": {**TOKEN, "origins": ["https://members.example"]}})
    assert spec.credential_origins() == {("https", "members.example", 443)}

"""request.proxies: a pool of real forward proxies on loopback in front of the demo site; rotation, tiers, health."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sluice.domain.egress import POOL_EMPTY
from sluice.domain.secrets import Secret, SecretUnavailable
from sluice.fetch import AddressGuard, Failed, Fetched, PageFetcher
from sluice.fetch.credentials import RequestCredentials, resolve_request
from sluice.fetch.proxies import ProxyPool, resolve_pool
from sluice.spec import Politeness, RequestSpec, SpecError, parse_spec
from sluice.spec.request import Origin
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.demosite.forward_proxy import RunningProxy, refusing_address, running_proxy

pytestmark = pytest.mark.anyio

ORIGINS: frozenset[Origin] = frozenset()
"""No origin takes credentials here: these tests are about the proxies, whose own credentials are apart."""
PASSWORDS = {"works": "test-pool-works-pw", "walls": "test-pool-walls-pw", "refuses": "test-pool-refuses-pw"}


@pytest.fixture(scope="module")
def site() -> Iterator[RunningDemoSite]:
    with running_demo_site() as running:
        yield running


def _section(*entries: dict[str, Any], rotation: str = "sticky") -> RequestSpec:
    return RequestSpec.model_validate({"proxies": list(entries), "proxy_rotation": rotation})


def _entry(name: str, tier: int = 0) -> dict[str, Any]:
    return {"name": name, "secret": f"proxies/{name}", "tier": tier}


def _pool(section: RequestSpec, urls: dict[str, str]) -> ProxyPool:
    def read(name: str) -> Secret:
        return Secret(urls[name.removeprefix("proxies/")])

    pool = resolve_pool(section, read)
    assert pool is not None
    return pool


def _fetcher(pool: ProxyPool, **politeness: Any) -> PageFetcher:
    creds = RequestCredentials(ORIGINS, proxies=pool)
    rules = {"obey_robots": False, "timeout_seconds": 5, "retry": {"times": 2, "backoff_base_seconds": 0.01}}
    return PageFetcher(
        Politeness.model_validate(rules | politeness), guard=AddressGuard(allow_loopback=True), credentials=creds
    )


def _url(proxy: RunningProxy, name: str) -> str:
    return proxy.url(("crawler", PASSWORDS[name]))


async def test_a_refusing_and_a_walling_proxy_are_ejected_and_the_pages_go_through_the_third(
    site: RunningDemoSite,
) -> None:
    with running_proxy("forward", ("crawler", PASSWORDS["works"])) as works, running_proxy("wall") as walls:
        urls = {"refuses": refusing_address(), "walls": _url(walls, "walls"), "works": _url(works, "works")}
        # Round-robin: every proxy is asked (sticky would keep the host on one of them).
        pool = _pool(_section(_entry("refuses"), _entry("walls"), _entry("works"), rotation="round_robin"), urls)
        async with _fetcher(pool, concurrency=1) as fetcher:
            outcomes = [await fetcher.fetch(f"{site.base_url}/catalogue/page-{n}.html") for n in range(1, 7)]
            routes = [fetcher.route(f"{site.base_url}/catalogue/page-{n}.html") for n in range(1, 7)]
    assert all(isinstance(o, Fetched) for o in outcomes), outcomes
    assert {r.proxy for r in routes if r is not None} == {"works"}
    assert pool.ejected() == {"refuses": "connect failed", "walls": "403 on every answer (3 of 3)"}
    assert works.log.requests
    assert all(line.startswith("GET http://127.0.0.1:") for line in works.log.requests)


async def test_a_proxy_that_answers_407_is_ejected_and_the_next_carries_the_request(site: RunningDemoSite) -> None:
    with running_proxy("auth") as revoked, running_proxy("forward") as works:
        # Round-robin: the first request goes through the first proxy, the revoked one.
        section = _section(_entry("revoked"), _entry("works"), rotation="round_robin")
        pool = _pool(section, {"revoked": revoked.url(), "works": works.url()})
        async with _fetcher(pool) as fetcher:
            outcome = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html")
            route = fetcher.route(f"{site.base_url}/catalogue/page-1.html")
    assert isinstance(outcome, Fetched)
    assert route is not None
    assert route.proxy == "works"
    assert [(f.proxy, f.reason, f.ejected) for f in route.failures] == [
        ("revoked", "407 proxy authentication required", True)
    ]
    assert len(revoked.log.requests) == 1  # ejected: never asked again


async def test_with_every_proxy_ejected_the_page_fails_saying_the_pool_is_empty(site: RunningDemoSite) -> None:
    pool = _pool(_section(_entry("a"), _entry("b")), {"a": refusing_address(), "b": refusing_address()})
    async with _fetcher(pool) as fetcher:
        outcome = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html")
    assert isinstance(outcome, Failed)
    assert (outcome.reason, outcome.retryable) == (POOL_EMPTY, False)
    assert pool.empty


async def test_sticky_keeps_a_host_on_one_proxy_and_round_robin_takes_turns(site: RunningDemoSite) -> None:
    with running_proxy() as one, running_proxy() as two:
        urls = {"one": one.url(), "two": two.url()}
        for rotation, expected in (("sticky", 1), ("round_robin", 2)):
            pool = _pool(_section(_entry("one"), _entry("two"), rotation=rotation), urls)
            async with _fetcher(pool, concurrency=1) as fetcher:
                for n in range(1, 5):
                    assert isinstance(await fetcher.fetch(f"{site.base_url}/catalogue/page-{n}.html"), Fetched)
                used = {fetcher.route(f"{site.base_url}/catalogue/page-{n}.html").proxy for n in range(1, 5)}  # type: ignore[union-attr]
            assert len(used) == expected, rotation


async def test_a_block_marker_moves_the_host_to_the_next_tier_which_fetches_the_page(site: RunningDemoSite) -> None:
    """Tier 0 answers with a block page (the spec's marker); the host moves to tier 1, which gets through."""
    with running_proxy("captcha") as cheap, running_proxy() as premium:
        pool = _pool(
            _section(_entry("cheap"), _entry("premium", tier=1)), {"cheap": cheap.url(), "premium": premium.url()}
        )
        breaker = {"markers": ["unusual traffic"]}
        async with _fetcher(pool, breaker=breaker) as fetcher:
            outcome = await fetcher.fetch(f"{site.base_url}/catalogue/page-1.html")
            route = fetcher.route(f"{site.base_url}/catalogue/page-1.html")
    assert isinstance(outcome, Fetched), outcome
    assert route is not None
    assert (route.proxy, route.tier) == ("premium", 1)
    assert pool.tier_of(f"127.0.0.1:{site.port}") == 1


def test_escalate_moves_a_host_up_one_tier_at_a_time_and_stops_at_the_last() -> None:
    pool = _pool(
        _section(_entry("a"), _entry("b", tier=1), _entry("c", tier=3)),
        {"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2", "c": "http://127.0.0.1:3"},
    )
    assert pool.tier_of("x:80") == 0
    assert [pool.escalate("x:80"), pool.escalate("x:80"), pool.escalate("x:80")] == [1, 3, None]
    assert pool.tier_of("y:80") == 0  # per host


def test_a_pool_proxy_is_named_by_reference_only_and_once() -> None:
    with pytest.raises(ValueError, match="secret"):
        RequestSpec.model_validate({"proxies": [{"name": "a", "url": "http://u:p@127.0.0.1:3128"}]})
    with pytest.raises(ValueError, match="proxy 'a' is named twice"):
        RequestSpec.model_validate({"proxies": [_entry("a"), _entry("a")]})
    with pytest.raises(ValueError, match="give proxy or proxies, not both"):
        RequestSpec.model_validate({"proxy": "http://127.0.0.1:3128", "proxies": [_entry("a")]})
    section = RequestSpec.model_validate({"proxies": [_entry("a"), _entry("b", tier=1)]})
    assert section.secret_names() == ["proxies/a", "proxies/b"]


def test_a_pool_secret_that_is_no_proxy_url_is_refused_naming_the_secret_not_its_value() -> None:
    section = _section(_entry("a"))
    with pytest.raises(SecretUnavailable) as caught:
        _pool(section, {"a": "socks5://crawler:test-pool-works-pw@127.0.0.1:1080"})
    assert "proxies/a" in str(caught.value)
    assert PASSWORDS["works"] not in str(caught.value) + repr(caught.value)


async def test_no_proxy_credentials_in_any_outcome_route_or_repr(site: RunningDemoSite) -> None:
    with running_proxy("forward", ("crawler", PASSWORDS["works"])) as works, running_proxy("wall") as walls:
        urls = {"refuses": refusing_address(), "walls": _url(walls, "walls"), "works": _url(works, "works")}
        pool = _pool(_section(_entry("refuses"), _entry("walls"), _entry("works"), rotation="round_robin"), urls)
        async with _fetcher(pool, concurrency=1) as fetcher:
            outcomes = [await fetcher.fetch(f"{site.base_url}/catalogue/page-{n}.html") for n in range(1, 5)]
            routes = [fetcher.route(f"{site.base_url}/catalogue/page-{n}.html") for n in range(1, 5)]
        shown = repr(outcomes) + repr(routes) + repr(pool.proxies) + repr(pool.ejected()) + repr(fetcher.credentials)
    for password in PASSWORDS.values():
        assert password not in shown


def test_a_spec_with_a_pool_validates(site: RunningDemoSite) -> None:
    data = {
        "name": "pooled",
        "seeds": [f"{site.base_url}/catalogue/page-1.html"],
        "extract": {"fields": {"title": "h1"}},
        "request": {"proxies": [_entry("a"), _entry("b", tier=1)], "proxy_rotation": "round_robin"},
    }
    spec = parse_spec(data)
    assert [p.name for p in spec.request.proxies] == ["a", "b"]
    with pytest.raises(SpecError, match="proxy_rotation"):
        parse_spec({**data, "request": {"proxies": [_entry("a")], "proxy_rotation": "random"}})


def test_resolving_the_request_section_leaves_a_pool_to_its_own_resolver() -> None:
    creds = resolve_request(_section(_entry("a")), ORIGINS, lambda name: Secret("http://127.0.0.1:1"))
    assert (creds.proxy, creds.proxies) == (None, None)


async def test_a_tripped_breaker_moves_the_host_to_the_next_tier_with_its_count_afresh(site: RunningDemoSite) -> None:
    """Tier 0's one proxy walls the host off (no other in the tier to try): its 403s trip the breaker, and the
    host's next page goes through tier 1 instead of being skipped as blocked."""
    with running_proxy("wall") as cheap, running_proxy() as premium:
        pool = _pool(
            _section(_entry("cheap"), _entry("premium", tier=1)), {"cheap": cheap.url(), "premium": premium.url()}
        )
        breaker = {"min_answers": 2, "max_blocked_share": 0.5}
        host = f"127.0.0.1:{site.port}"
        async with _fetcher(pool, concurrency=1, breaker=breaker) as fetcher:
            first = [await fetcher.fetch(f"{site.base_url}/catalogue/page-{n}.html") for n in (1, 2)]
            assert pool.tier_of(host) == 0
            third = await fetcher.fetch(f"{site.base_url}/catalogue/page-3.html")
            route = fetcher.route(f"{site.base_url}/catalogue/page-3.html")
            after = fetcher.gate.known(host)
    assert [(o.reason if isinstance(o, Failed) else o) for o in first] == ["http 403", "http 403"]
    assert isinstance(third, Fetched), third
    assert route is not None
    assert (route.proxy, route.tier, pool.tier_of(host)) == ("premium", 1, 1)
    assert pool.ejected() == {}  # two 403s are not yet a wall: the breaker spoke first
    assert after is None  # not a fleet batch: nothing adopted, nothing to hand on

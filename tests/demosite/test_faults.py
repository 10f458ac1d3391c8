"""Configured fault injection: the deterministic rule and each fault kind over HTTP."""

from __future__ import annotations

import httpx
import pytest

from sluice_tools.demosite import DemoSiteConfig, Fault, RunningDemoSite
from sluice_tools.demosite.faults import choose

LISTING = "/catalogue/page-1.html"


def test_rule_is_deterministic_and_bounded_by_faulty_attempts() -> None:
    config = DemoSiteConfig(fail_503_fraction=0.3, fail_429_fraction=0.2, fault_seed=4)
    paths = [f"/catalogue/page-{n}.html" for n in range(2000)]
    first = [choose(config, p, 0) for p in paths]
    assert first == [choose(config, p, 0) for p in paths]
    share_503 = first.count(Fault.UNAVAILABLE) / len(paths)
    share_429 = first.count(Fault.TOO_MANY) / len(paths)
    assert 0.25 <= share_503 <= 0.35
    assert 0.15 <= share_429 <= 0.25
    assert all(choose(config, p, 3) is Fault.NONE for p in paths)
    always = DemoSiteConfig(fail_503_fraction=1.0, faulty_attempts=None)
    assert choose(always, "/x", 10_000) is Fault.UNAVAILABLE
    reseeded = DemoSiteConfig(fail_503_fraction=0.3, fail_429_fraction=0.2, fault_seed=5)
    assert first != [choose(reseeded, p, 0) for p in paths]


def test_invalid_fractions_are_refused() -> None:
    with pytest.raises(ValueError, match="fractions"):
        DemoSiteConfig(fail_503_fraction=0.7, reset_fraction=0.5)


def test_503_until_faulty_attempts_exhausted(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(fail_503_fraction=1.0, faulty_attempts=2)
    assert [client.get(LISTING).status_code for _ in range(3)] == [503, 503, 200]
    assert client.get("/robots.txt").status_code == 200
    assert client.get("/_test/status/200").status_code == 200
    site.reset()
    assert client.get(LISTING).status_code == 503


def test_same_sequence_faults_the_same_way(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(fail_503_fraction=0.4, fail_429_fraction=0.2, retry_after_seconds=7)
    paths = [f"/catalogue/page-{n}.html" for n in range(1, 11)] * 3

    def run() -> list[int]:
        site.reset()
        return [client.get(p).status_code for p in paths]

    statuses = run()
    assert statuses == run()
    assert {503, 429, 200} <= set(statuses)
    assert [client.get(p).status_code for p in paths[:10]] == [200] * 10
    site.reset()
    too_many = next(r for r in (client.get(p) for p in paths) if r.status_code == 429)
    assert too_many.headers["retry-after"] == "7"


def test_reset_fault_cuts_the_body(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(reset_fraction=1.0, faulty_attempts=1)
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(LISTING, headers={"Accept-Encoding": "identity"})
    assert client.get(LISTING).status_code == 200


def test_slow_fault_still_delivers_the_page(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(slow_body_fraction=1.0, slow_body_seconds=0.1, faulty_attempts=1)
    page = site.catalogue.get(LISTING)
    assert page is not None
    with client.stream("GET", LISTING, headers={"Accept-Encoding": "identity"}) as response:
        chunks = [c for c in response.iter_raw() if c]
    assert b"".join(chunks) == page.body
    assert len(chunks) > 1


def test_oversized_fault_streams_a_huge_body(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(oversized_fraction=1.0, oversized_bytes=4 * 1024 * 1024)
    with client.stream("GET", LISTING) as response:
        assert response.headers["content-length"] == str(4 * 1024 * 1024)
        assert sum(len(c) for c in response.iter_raw()) == 4 * 1024 * 1024


def test_latency_applies_without_changing_content(site: RunningDemoSite, client: httpx.Client) -> None:
    site.set_config(latency_ms=20)
    assert client.get("/robots.txt").text.startswith("User-agent: *")

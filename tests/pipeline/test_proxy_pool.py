"""A crawl through a pool of three real forward proxies on loopback, on both adapter sets: one refuses connections,
one walls everything off with 403s, one works. The crawl finishes through the third; the summary names the other
two with their reasons; no proxy's credentials are found anywhere the run wrote."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.domain.layout import archive_key
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.demosite.forward_proxy import RunningProxy, refusing_address, running_proxy

from .conftest import Logs, Pipeline, SpecData
from .test_requests import Provide, everything_written, provide  # noqa: F401 - provide is a fixture

CRAWL = "pooled"
USER = "crawler"
PASSWORDS = {"refuses": "test-pool-refuses-pw", "walls": "test-pool-walls-pw", "works": "test-pool-works-pw"}
MAX_BATCHES = 50
PAGES = 5
"""The seeds: catalogue pages 1 to 5 (the demo site's catalogue has that many)."""


@pytest.fixture
def proxies() -> Iterator[tuple[RunningProxy, RunningProxy]]:
    with (
        running_proxy("wall", (USER, PASSWORDS["walls"])) as walls,
        running_proxy("forward", (USER, PASSWORDS["works"])) as works,
    ):
        yield walls, works


def _pooled_spec(books_spec: SpecData, base_url: str) -> dict[str, Any]:
    data: dict[str, Any] = books_spec(CRAWL, base_url, pages=PAGES, max_depth=0)
    # Round-robin, so every proxy is asked (sticky would keep the one host on one of them).
    data["request"] = {
        "proxies": [{"name": name, "secret": f"proxies/{name}"} for name in ("refuses", "walls", "works")],
        "proxy_rotation": "round_robin",
    }
    return data


def _run(pipeline: Pipeline) -> tuple[str, list[str]]:
    run_id = pipeline.start(CRAWL)
    bodies: list[str] = []
    for _ in range(MAX_BATCHES):
        messages = pipeline.receive(10)
        if not messages:
            break
        bodies += [m.body for m in messages]
        pipeline.deliver(messages)
    assert [f["run_id"] for f in pipeline.finalize()] == [run_id]
    return run_id, bodies


def test_the_crawl_finishes_through_the_working_proxy_and_names_the_refusing_and_the_walling_one(
    pipeline: Pipeline,
    site: RunningDemoSite,
    books_spec: SpecData,
    provide: Provide,  # noqa: F811 - the fixture imported above
    proxies: tuple[RunningProxy, RunningProxy],
    logs: Logs,
    tmp_path: Path,
) -> None:
    walls, works = proxies
    refusing = refusing_address().replace("http://", f"http://{USER}:{PASSWORDS['refuses']}@")
    provide("proxies/refuses", refusing)
    provide("proxies/walls", walls.url((USER, PASSWORDS["walls"])))
    provide("proxies/works", works.url((USER, PASSWORDS["works"])))
    # Every response archived too (output.archive): the archive is among the places searched below.
    pipeline.spec(_pooled_spec(books_spec, site.base_url) | {"output": {"archive": True}})

    run_id, bodies = _run(pipeline)

    t = pipeline.tally(CRAWL, run_id)
    assert (t.fetched, t.failed, t.skipped) == (PAGES, 0, 0)  # every seed, through "works"
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["proxies"]["works"] == {"tier": 0, "pages": PAGES, "failures": 0, "ejected": False, "reason": None}
    refused, walled = summary["proxies"]["refuses"], summary["proxies"]["walls"]
    assert (refused["pages"], refused["ejected"], refused["reason"]) == (0, True, "connect failed")
    assert (walled["pages"], walled["ejected"], walled["reason"]) == (0, True, "403 on every answer (3 of 3)")
    assert refused["failures"] >= 1
    assert walled["failures"] >= 3
    assert summary["egress"] == {"route": "proxies", "pages_by_tier": {"0": PAGES}}
    check = next(c for c in summary["verdict"]["checks"] if c["check"] == "proxy_pool")
    assert check["ok"] is True
    assert "refuses: connect failed" in check["message"]
    assert "walls: 403 on every answer (3 of 3)" in check["message"]
    assert summary["verdict"]["healthy"] is True
    ejections = {(e["proxy"], e["reason"]) for e in logs.named("proxy ejected")}
    assert ejections == {("refuses", "connect failed"), ("walls", "403 on every answer (3 of 3)")}
    # The working proxy carried every page to the site, each with its own credentials; the wall saw its own.
    assert site.stats.count("/catalogue/page-1.html") == 1
    assert all(a.startswith("Basic ") for a in works.log.authorizations)
    assert walls.log.requests
    files = {e.result.archive.file for e in pipeline.services.frontier.scan(run_id) if e.result and e.result.archive}
    archives = [pipeline.services.objects.get(archive_key(CRAWL, run_id, file)) for file in sorted(files)]
    assert files
    assert all(archives)
    written = everything_written(pipeline, logs, run_id, bodies, tmp_path, crawl=CRAWL)
    written += "\n".join(gzip.decompress(a or b"").decode("latin-1") for a in archives)
    assert "proxies" in written  # the summary's pool report is in what was searched
    for password in PASSWORDS.values():
        assert password not in written


def test_with_every_proxy_gone_the_pages_fail_and_the_verdict_says_the_pool_is_empty(
    pipeline: Pipeline,
    site: RunningDemoSite,
    books_spec: SpecData,
    provide: Provide,  # noqa: F811 - the fixture imported above
) -> None:
    for name in ("refuses", "walls", "works"):
        provide(f"proxies/{name}", refusing_address())
    pipeline.spec(_pooled_spec(books_spec, site.base_url))

    run_id, _ = _run(pipeline)

    summary = pipeline.summary(CRAWL, run_id)
    assert summary["pages"]["fetched"] == 0
    assert summary["verdict"]["healthy"] is False
    check = next(a for a in summary["verdict"]["alerts"] if a["check"] == "proxy_pool")
    assert check["message"].startswith("the proxy pool is empty: ")
    assert all(p["ejected"] and p["reason"] == "connect failed" for p in summary["proxies"].values())
    assert "proxy pool empty: every proxy was ejected" in json.dumps(summary["failures"])
    assert site.stats.count("/catalogue/page-1.html") == 0


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        ((), {"route": "direct"}),
        (("203.0.113.7", "203.0.113.8"), {"route": "fixed", "addresses": ["203.0.113.7", "203.0.113.8"]}),
    ],
)
def test_a_runs_summary_says_which_route_its_requests_took(
    pipeline: Pipeline,
    site: RunningDemoSite,
    books_spec: SpecData,
    addresses: tuple[str, ...],
    expected: dict[str, Any],
) -> None:
    """With the stack's ``egress: fixed``, its addresses (the functions' SLUICE_EGRESS_IPS); else direct."""
    pipeline.configure(egress_ips=",".join(addresses) if pipeline.kind == "aws" else addresses)
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=PAGES, max_depth=0))
    run_id = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["egress"] == expected
    assert "proxies" not in summary

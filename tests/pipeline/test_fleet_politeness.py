"""Per-host limits hold for the whole fleet: eight workers, each its own container, one host.

Measured where it counts, at the site: the demo site reports the most requests of a host it had
in flight at once, the shortest gap between two of its request starts, and when each began.
Each test runs on the local store (``sluice run --workers 8``) and on the AWS path (moto).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.config import DEFAULT

from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import LocalRun

from .conftest import Pipeline, SpecData

CRAWL = "books"
HOST = "127.0.0.1"
WORKERS = 8
SMALL_BATCHES = replace(DEFAULT, batch_size=2, urls_per_message=2)
"""Many small batches: each worker would take a few URLs of the host at once, were it not held by one."""


def crawl(
    tmp_path: Path, data: dict[str, Any], *, emulate: bool, workers: int = WORKERS, config: Any = SMALL_BATCHES
) -> LocalRun:
    spec = parse_spec(data)
    crawls = tmp_path / "crawls"
    crawls.mkdir(exist_ok=True)
    (crawls / f"{spec.name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    if emulate:
        runner = EmulatedRunner(
            crawls, tmp_path / f"moto-{spec.name}", workers=workers, allow_loopback=True, config=config
        )
        return runner.run(spec)
    fleet = LocalFleet(
        crawls,
        tmp_path / f"state-{spec.name}",
        workers=workers,
        batch_messages=config.batch_size,  # the batches the emulated stack plays too
        allow_loopback=True,
        config=config,
    )
    return fleet.run(spec)


def copies(books_spec: SpecData, base_url: str, n: int, retry_times: int = 2, **politeness: Any) -> dict[str, Any]:
    urls = [f"/catalogue/page-1.html?copy={i}" for i in range(n)]
    data: dict[str, Any] = books_spec(CRAWL, base_url, pages=0, urls=urls, max_depth=0, retry_times=retry_times)
    data["politeness"] |= {"concurrency": 16, **politeness}
    return data


both = pytest.mark.parametrize("emulate", [False, True], ids=["local", "emulated"])


@both
def test_a_per_host_cap_of_4_holds_with_8_workers(tmp_path: Path, books_spec: SpecData, emulate: bool) -> None:
    with running_demo_site(books=100, latency_ms=40) as site:
        run = crawl(tmp_path, copies(books_spec, site.base_url, 48, concurrency_per_domain=4), emulate=emulate)
        assert run.summary.to_json()["pages"]["fetched"] == 48
        # The cap, reached (the host was kept busy) and never passed, by eight workers together.
        assert site.stats.max_in_flight_by_host[HOST] == 4


@both
def test_a_min_delay_holds_across_workers(tmp_path: Path, books_spec: SpecData, emulate: bool) -> None:
    delay = 0.2
    with running_demo_site(books=100) as site:
        data = copies(books_spec, site.base_url, 12, concurrency_per_domain=4, min_delay_seconds=delay)
        run = crawl(tmp_path, data, emulate=emulate)
        assert run.summary.to_json()["pages"]["fetched"] == 12
        starts = [r.at for r in site.stats.records() if r.path != "/robots.txt"]
        assert len(starts) == 12
        # Request starts as the site saw them, spaced by the delay across batches and workers. The
        # crawler spaces the moment it admits a request, the site sees it arrive: on a loaded machine
        # (eight workers' threads on two cores) the two differ by up to tens of milliseconds. A host
        # handed on without its spacing shows gaps of a batch's write time, far below this.
        assert site.stats.min_gap_ms_by_host[HOST] >= delay * 1000 - 50


@both
def test_a_429_storm_with_retry_after_pauses_every_worker(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, emulate: bool
) -> None:
    """Every page's first answer is a 429 with Retry-After: 1; no request of the host starts inside a pause."""
    pause = 1.0
    site.site.set_config(
        replace(site.config, fail_429_fraction=1.0, faulty_attempts=1, retry_after_seconds=round(pause))
    )
    data = books_spec(CRAWL, site.base_url, pages=5, max_depth=0, retry_times=3)  # five paths, faults are per path
    data["politeness"] |= {"concurrency": 16, "concurrency_per_domain": 2}
    run = crawl(tmp_path, data, emulate=emulate)
    assert run.summary.to_json()["pages"]["fetched"] == 5
    log = [r for r in site.stats.records() if r.path != "/robots.txt"]
    throttled = [r for r in log if r.status == 429]
    assert len(throttled) == 5  # each page once
    for answer in throttled:
        # The one other request in flight (cap 2) may arrive after it; none sent after it, before the pause ends.
        sent_after = [r for r in log if answer.seq + 1 < r.seq and answer.at < r.at < answer.at + pause - 0.01]
        assert sent_after == []
    assert run.summary.to_json()["verdict"]["healthy"] is True  # obeyed throttling is no block


def test_latency_rising_under_load_lowers_concurrency(tmp_path: Path, books_spec: SpecData) -> None:
    """A host that slows with every request in flight beyond 2: adaptation settles near 2, a fixed cap stays at 12."""
    seen: dict[bool, float] = {}
    for adaptive in (True, False):
        with running_demo_site(books=100, latency_ms=10, latency_per_request_ms=30, latency_knee=2) as site:
            data = copies(books_spec, site.base_url, 120, concurrency_per_domain=12, adaptive=adaptive)
            data["name"] = f"adaptive-{str(adaptive).lower()}"
            run = crawl(tmp_path, data, emulate=False, workers=2, config=DEFAULT)  # batches of up to 100 URLs
            assert run.summary.to_json()["pages"]["fetched"] == 120
            late = [r.concurrent for r in site.stats.records() if r.path != "/robots.txt"][60:]
            seen[adaptive] = sum(late) / len(late)
    assert seen[False] > 8  # the fixed cap keeps 12 in flight, each slower than the last
    assert seen[True] < seen[False] / 2


@both
def test_a_host_turning_to_403_trips_the_breaker_and_the_verdict_names_it(
    tmp_path: Path, books_spec: SpecData, emulate: bool
) -> None:
    """After 10 answers the site refuses everything: the breaker pauses it, the rest is skipped, not hammered."""
    with running_demo_site(books=100, ban_after=10) as site:
        data = copies(books_spec, site.base_url, 60, concurrency_per_domain=2)
        data["politeness"]["breaker"] = {"min_answers": 5, "max_blocked_share": 0.5}
        data["alerts"]["max_error_rate"] = 1.0  # the error rate is not what must catch it
        run = crawl(tmp_path, data, emulate=emulate)
        host = f"{HOST}:{site.port}"
        pages = run.summary.to_json()["pages"]
        refused = [r for r in site.stats.records() if r.status == 403]
        assert len(refused) <= 5 + 2  # the five the breaker judged, and the ones in flight when it tripped
        assert pages["skipped"] >= 60 - 10 - len(refused)
        assert pages["fetched"] + pages["failed"] + pages["skipped"] == 60
        [(blocked, said)] = run.summary.to_json()["blocked_hosts"].items()
        assert blocked == host
        assert said["urls_skipped"] == pages["skipped"]
        assert "5 of 5 answers (100%)" in said["reason"]
        verdict = run.summary.to_json()["verdict"]
        assert verdict["healthy"] is False
        [check] = [a for a in verdict["alerts"] if a["check"] == "blocked"]
        assert host in check["message"]
        assert "100%" in check["message"]


def test_two_crawls_at_once_the_small_one_is_not_starved(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """A large crawl of one host and a small one of another, started together: the second fetcher to ask
    gets the small crawl's host, not more of the large one's backlog (a host is a group, held by one)."""
    pipeline.configure(urls_per_message=10)
    with running_demo_site(books=100) as other:
        large = books_spec(
            "large", site.base_url, pages=0, urls=[f"/catalogue/page-1.html?copy={n}" for n in range(200)], max_depth=0
        )
        large["follow"]["max_pages"] = 200
        pipeline.spec(large)
        pipeline.spec(books_spec("small", other.base_url, pages=5, max_depth=0))
        large_run, small_run = pipeline.start("large"), pipeline.start("small")

        first, second = pipeline.receive(10), pipeline.receive(10)  # two fetchers ask at once
        pipeline.deliver(first)
        pipeline.deliver(second)

        assert pipeline.tally("small", small_run).done == 5  # all of it, in the first round
        assert pipeline.tally("large", large_run).pending >= 100  # while the large crawl has most still to do

"""Sitemap seeds on both adapter sets: an index and its gzipped child followed, robots.txt's Sitemap: lines,
every bound refusing by name, and a nightly run that asks only for the pages whose lastmod moved."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.adapters.aws.clients import client
from sluice.domain.secrets import local_variable
from sluice.messages import StartEvent
from sluice.pipeline.start.fanout import start_run
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.demosite.config import DEMO_TOKEN

from .conftest import Pipeline, SpecData

CRAWL = "books"
INDEX = "/sitemap-index.xml"


def sitemap_spec(books_spec: SpecData, base_url: str, **sitemaps: Any) -> dict[str, Any]:
    """The demo crawl seeded from sitemaps alone (``sitemaps`` is the ``seeds.sitemaps`` mapping)."""
    data: dict[str, Any] = books_spec(CRAWL, base_url, pages=0, max_depth=0)
    data["seeds"] = {"sitemaps": {"urls": [f"{base_url}{INDEX}"], **sitemaps}}
    return data


def listed(site: RunningDemoSite) -> set[str]:
    """Every page the demo's sitemap index lists: the listing pages and the books."""
    catalogue = site.catalogue
    return {catalogue.listing_path(n) for n in range(1, catalogue.pages + 1)} | {
        catalogue.detail_path(b) for b in catalogue.books
    }


def pages_asked(site: RunningDemoSite) -> Counter[str]:
    """The site's request log, sitemaps and robots.txt left out."""
    return Counter(r.path for r in site.stats.records() if "/sitemap" not in r.path and r.path != "/robots.txt")


def refusals(summary: dict[str, Any]) -> dict[str, str]:
    return {r["url"]: r["reason"] for r in summary["sitemaps"]["refused"]}


def test_an_index_and_its_gzipped_child_seed_exactly_the_pages_they_list(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(sitemap_spec(books_spec, site.base_url))
    run_id = pipeline.run(CRAWL)

    asked = pages_asked(site)
    assert set(asked) == listed(site)
    assert set(asked.values()) == {1}
    for path in (INDEX, "/sitemaps/listings.xml", "/sitemaps/books.xml.gz"):
        assert site.stats.count(path) == 1
    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["pages"]["seeds"], summary["pages"]["fetched"], summary["records"]["total"]) == (105, 105, 100)
    sitemaps = summary["sitemaps"]
    assert (sitemaps["documents"], sitemaps["urls"], sitemaps["with_lastmod"], sitemaps["refused"]) == (3, 105, 105, [])
    assert summary["verdict"]["healthy"] is True


def test_from_robots_finds_the_sitemaps_robots_txt_names(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"] = {"urls": [f"{site.base_url}/catalogue/page-1.html"], "sitemaps": "from_robots"}
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    assert set(pages_asked(site)) == listed(site)
    summary = pipeline.summary(CRAWL, run_id)
    sitemaps = summary["sitemaps"]
    # robots.txt names the index and /sitemap.xml; the index's two children make four documents.
    assert (sitemaps["robots"], sitemaps["documents"], sitemaps["urls"], sitemaps["duplicates"]) == (1, 4, 105, 5)
    assert summary["pages"]["seeds"] == 105  # page 1 is the spec's seed and a sitemap's page: one seed
    assert site.stats.count("/robots.txt") == 1  # the scheduler's copy is the run's: no fetcher asks again


@pytest.mark.parametrize(
    ("sitemaps", "refused"),
    [
        ({"max_bytes": 4096}, {"/sitemaps/books.xml.gz": "larger than max_bytes (4096 bytes) once decompressed"}),
        (
            {"max_depth": 0},
            {
                "/sitemaps/listings.xml": "nested deeper than max_depth (0 index hops): not read",
                "/sitemaps/books.xml.gz": "nested deeper than max_depth (0 index hops): not read",
            },
        ),
        ({"max_sitemaps": 2}, {"/sitemaps/books.xml.gz": "over max_sitemaps (2): not read"}),
    ],
    ids=["bytes", "depth", "count"],
)
def test_each_bound_refuses_what_it_stops_by_name_and_nothing_else_is_lost(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, sitemaps: dict[str, Any], refused: dict[str, str]
) -> None:
    data = sitemap_spec(books_spec, site.base_url, **sitemaps)
    seed = f"{site.base_url}/catalogue/page-3.html"
    data["seeds"]["urls"] = [seed]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert refusals(summary) == {site.base_url + path: reason for path, reason in refused.items()}
    assert summary["sitemaps"]["refused_count"] == len(refused)
    catalogue = site.catalogue
    kept = {catalogue.listing_path(n) for n in range(1, catalogue.pages + 1)} if "max_depth" not in sitemaps else set()
    assert set(pages_asked(site)) == kept | {"/catalogue/page-3.html"}  # the spec's own seed, whatever happens
    assert summary["records"]["total"] == (100 if kept else 20)


def test_indexes_nested_past_max_depth_are_read_to_it(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    nest = f"{site.base_url}/_test/sitemap-nest"
    data = sitemap_spec(books_spec, site.base_url, max_depth=2)
    data["seeds"]["sitemaps"]["urls"] = [f"{nest}/2", f"{nest}/4"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    # nest/2 -> nest/1 -> nest/0 (a urlset of page 1): two hops. nest/4 -> nest/3 -> nest/2 (met already).
    assert refusals(summary) == {}
    assert summary["sitemaps"]["documents"] == 5
    assert set(pages_asked(site)) == {"/catalogue/page-1.html"}

    data["seeds"]["sitemaps"]["urls"] = [f"{nest}/3"]
    pipeline.spec(data)
    second = pipeline.run(CRAWL)
    assert refusals(pipeline.summary(CRAWL, second)) == {
        f"{nest}/0": "nested deeper than max_depth (2 index hops): not read"
    }


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("broken", "malformed: not well-formed XML: no element found at line 3, column 11"),
        ("doctype", "malformed: a DOCTYPE: sitemaps need none, and no DTD is read (its entities could expand)"),
        ("html", "malformed: not a sitemap: an HTML page"),
    ],
)
def test_a_malformed_sitemap_is_refused_naming_it_and_the_run_goes_on(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, kind: str, reason: str
) -> None:
    bad = f"{site.base_url}/_test/sitemap-bad?kind={kind}"
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"]["sitemaps"]["urls"].append(bad)
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert refusals(summary) == {bad: reason}
    assert (summary["pages"]["fetched"], summary["records"]["total"]) == (105, 100)
    assert summary["verdict"]["healthy"] is True


def test_a_gzip_file_bomb_stops_at_max_bytes(pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData) -> None:
    bomb = f"{site.base_url}/_test/sitemap-bomb?bytes={1 << 30}"  # a gigabyte of zeros in about a megabyte
    data = sitemap_spec(books_spec, site.base_url, max_bytes=1 << 20)
    data["seeds"]["sitemaps"]["urls"] = [bomb, f"{site.base_url}/sitemaps/listings.xml"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert refusals(summary) == {bomb: "larger than max_bytes (1048576 bytes)"}
    assert summary["records"]["total"] == 100


def test_a_nightly_run_asks_only_for_the_pages_whose_lastmod_moved(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(sitemap_spec(books_spec, site.base_url))
    first = pipeline.run(CRAWL)
    # Published now, maybe in the very second of a fetch of the first run: the same second is not "before".
    site.set_catalogue(books=100, version=1, changed_fraction=0.02)
    site.reset()
    changed = [b for b in site.catalogue.books if b.changed_in == 1]
    moved = {site.catalogue.detail_path(b) for b in changed} | {
        site.catalogue.listing_path((b.id - 1) // 20 + 1) for b in changed
    }
    second = pipeline.run(CRAWL)

    asked = pages_asked(site)
    assert set(asked) == moved
    assert set(asked.values()) == {1}
    summary = pipeline.summary(CRAWL, second)
    pages, records = summary["pages"], summary["records"]
    assert (pages["fetched"], pages["not_due"], pages["not_modified"]) == (len(moved), 105 - len(moved), 0)
    assert (records["total"], records["changed"], records["unchanged"]) == (100, 2, 98)
    assert summary["catalog_run"] == first
    assert summary["verdict"]["healthy"] is True
    counts = pipeline.tally(CRAWL, second).counts(records["total"])
    assert (counts.not_due, counts.attempted) == (105 - len(moved), len(moved))  # not asked: not attempted


def test_a_fan_out_continued_in_a_fresh_invocation_reads_no_sitemap_again(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sluice.pipeline.start import fanout as start

    monkeypatch.setattr(start, "CHUNK", 10)
    pipeline.spec(sitemap_spec(books_spec, site.base_url))
    # Under a minute left: the fan-out hands on after its first chunk (the sitemaps get half of it).
    first = start_run(StartEvent(crawl=CRAWL), pipeline.services, time_left=lambda: 59.0)
    assert (first.complete, first.total) == (False, 105)
    while pipeline.start_requests:
        start_run(StartEvent.model_validate(pipeline.start_requests.pop()), pipeline.services, time_left=lambda: 900.0)
    pipeline.drain()
    pipeline.finalize()

    assert site.stats.count(INDEX) == 1
    asked = pages_asked(site)
    assert set(asked) == listed(site)
    assert set(asked.values()) == {1}
    assert pipeline.summary(CRAWL, first.run_id)["pages"]["fetched"] == 105


def test_a_changed_spec_fetches_every_page_whatever_its_lastmod(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = sitemap_spec(books_spec, site.base_url)
    pipeline.spec(data)
    pipeline.run(CRAWL)
    data["extract"]["fields"]["stock"] = {"selector": "p.availability"}  # new records: nothing can be reused
    pipeline.spec(data)
    site.reset()
    second = pipeline.run(CRAWL)

    pages = pipeline.summary(CRAWL, second)["pages"]
    assert (pages["fetched"], pages["not_due"]) == (105, 0)
    assert set(pages_asked(site)) == listed(site)


def test_a_first_run_whose_only_sitemap_is_missing_ends_unhealthy_naming_it(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"]["sitemaps"]["urls"] = [f"{site.base_url}/sitemaps/gone.xml"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert refusals(summary) == {f"{site.base_url}/sitemaps/gone.xml": "http 404"}
    assert (summary["status"], summary["pages"]["seeds"], summary["records"]["total"]) == ("finished", 0, 0)
    assert [a["check"] for a in summary["verdict"]["alerts"]] == ["records_nonzero"]


def test_sluice_run_says_what_the_sitemaps_gave_and_how_many_pages_were_not_due(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"]["sitemaps"]["urls"].append(f"{site.base_url}/sitemaps/gone.xml")
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    run = ["run", str(spec), "--allow-loopback", "--state", str(tmp_path / "state"), "--workers", "2"]

    assert main([*run, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    done = ("fetched", "not_modified", "not_due", "failed", "skipped")
    assert {k: first["pages"][k] for k in done} == {
        "fetched": 105,
        "not_modified": 0,
        "not_due": 0,
        "failed": 0,
        "skipped": 0,
    }
    assert (first["sitemaps"]["urls"], first["sitemaps"]["refused_count"]) == (105, 1)

    assert main(run) == 0
    text = capsys.readouterr().out
    assert "  pages    fetched 0, not modified 0, not due 105, failed 0, skipped 0" in text
    assert "  sitemaps 4 read, 105 page(s) listed (105 with lastmod)" in text
    assert f"           refused {site.base_url}/sitemaps/gone.xml: http 404" in text
    assert "  records  100 (new 0, changed 0, unchanged 100)" in text


def test_a_sitemap_on_an_address_the_run_may_not_reach_is_refused_by_the_address_guard(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.configure(allow_loopback=False)  # as deployed: 127.0.0.1 is not a target
    pipeline.spec(sitemap_spec(books_spec, site.base_url))
    run_id = pipeline.run(CRAWL)

    [(url, reason)] = refusals(pipeline.summary(CRAWL, run_id)).items()
    assert url == f"{site.base_url}{INDEX}"
    assert "loopback" in reason
    assert site.stats.total == 0  # not even robots.txt was asked


SESSION_SECRET = "sluice/test/sitemap-session"


def test_sitemaps_behind_a_door_are_asked_with_the_specs_request_section(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"]["sitemaps"]["urls"] = [f"{site.base_url}/members/sitemap-index.xml"]
    data["request"] = {"cookies": {"demo_session": {"secret": SESSION_SECRET}}}
    pipeline.spec(data)
    missing = pipeline.run(CRAWL)  # the secret is not there yet: no sitemap is asked without it
    [(url, reason)] = refusals(pipeline.summary(CRAWL, missing)).items()
    assert (url, reason.split(":")[0]) == (f"{site.base_url}/members/sitemap-index.xml", "not read")
    assert f"secret '{SESSION_SECRET}' unavailable" in reason
    assert site.stats.count("/members/sitemap-index.xml") == 0

    if pipeline.kind == "local":
        monkeypatch.setenv(local_variable(SESSION_SECRET), DEMO_TOKEN)
    else:
        client("secretsmanager").create_secret(Name=SESSION_SECRET, SecretString=DEMO_TOKEN)
    run_id = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["sitemaps"]["refused"], summary["sitemaps"]["urls"]) == ([], 105)
    assert set(pages_asked(site)) == {f"/members{path}" for path in listed(site)}
    assert (summary["pages"]["fetched"], summary["records"]["total"]) == (105, 100)


def test_a_sitemap_an_index_names_on_another_host_is_not_fetched_and_is_counted(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """main fetched it (and that host's robots.txt), though none of its pages could be crawled."""
    data = sitemap_spec(books_spec, site.base_url)
    data["seeds"]["sitemaps"]["urls"] = [f"{site.base_url}/_test/sitemap-nest/1?host=localhost:{site.port}"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    assert site.stats.count("/_test/sitemap-nest/0") == 0
    sitemaps = pipeline.summary(CRAWL, run_id)["sitemaps"]
    assert sitemaps["sitemaps_out_of_scope"] == 1
    assert refusals(pipeline.summary(CRAWL, run_id)) == {
        f"http://localhost:{site.port}/_test/sitemap-nest/0": (
            "on a host out of the crawl's scope: not read (its pages would not be)"
        )
    }


@pytest.mark.parametrize("fatal", [False, True])
def test_a_sitemap_crawl_cut_by_max_pages_says_so_and_can_be_made_unhealthy(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, fatal: bool
) -> None:
    """The index lists 105 pages; max_pages 50 leaves 55 out, which the truncated check counts."""
    data = sitemap_spec(books_spec, site.base_url)
    data["follow"]["max_pages"] = 50
    data["alerts"]["fail_when_truncated"] = fatal
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["pages"]["fetched"], summary["sitemaps"]["left_out"]) == (50, 55)
    checks = {c["check"]: c for c in summary["verdict"]["checks"]}
    assert "sitemaps: 55 page URL(s) left out past max_urls or max_pages (50)" in checks["truncated"]["message"]
    assert checks["truncated"]["ok"] is not fatal
    assert summary["verdict"]["healthy"] is not fatal

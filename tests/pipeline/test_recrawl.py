"""Adaptive recrawl on both adapter sets, nights a simulated day apart: static pages asked less and less often
while every night's records stay whole, a change collected within max_age, seeds asked always when the spec says
so, a sitemap's lastmod deciding where there is one, and nothing changed without the section."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.adapters.aws.codec import result_plain
from sluice.domain.clock import ShiftedClock
from sluice.domain.recrawl import DAY_S
from sluice.spec import load_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.summary import as_json, as_text

from .conftest import Pipeline, SpecData

CRAWL = "books"
RECORDS = 100
PAGES = 5


def recrawl_spec(books_spec: SpecData, base_url: str, **recrawl: Any) -> dict[str, Any]:
    data: dict[str, Any] = books_spec(CRAWL, base_url)
    data["recrawl"] = recrawl
    return data


def pages_asked(site: RunningDemoSite) -> Counter[str]:
    """The site's request log since its last reset, robots.txt and sitemaps left out."""
    return Counter(r.path for r in site.stats.records() if r.path != "/robots.txt" and "/sitemap" not in r.path)


def night(pipeline: Pipeline, site: RunningDemoSite) -> tuple[str, Counter[str]]:
    """A day later, a run: its id and the pages it asked the site for."""
    pipeline.clock.advance(DAY_S)
    site.reset()
    run_id = pipeline.run(CRAWL)
    return run_id, pages_asked(site)


def intervals(pipeline: Pipeline, run_id: str) -> dict[str, int | None]:
    """Each page's interval in days after the run, by path."""
    return {
        e.url.split("/", 3)[3]: (e.result.interval // DAY_S if e.result.interval is not None else None)
        for e in pipeline.services.frontier.scan(run_id)
        if e.result is not None
    }


def test_static_nights_ask_for_half_the_pages_or_fewer_and_every_night_keeps_every_record(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(recrawl_spec(books_spec, site.base_url, grow=1.0, max_age_days=4))
    asked = []
    for _ in range(6):
        run_id, pages = night(pipeline, site)
        asked.append(sum(pages.values()))
        summary = pipeline.summary(CRAWL, run_id)
        assert summary["records"]["total"] == RECORDS
        assert summary["verdict"]["healthy"] is True
        pages_done = summary["pages"]
        assert pages_done["fetched"] + pages_done["not_modified"] + pages_done["not_due"] == PAGES
        assert pages_done["not_due_by"] == {"sitemap": 0, "schedule": PAGES - asked[-1]}

    # Intervals of 1, 2, then 4 days (doubled on each unchanged fetch, max_age 4): asked on nights 1, 2 and 4.
    assert asked == [PAGES, PAGES, 0, PAGES, 0, 0]
    assert sum(asked[1:]) <= 0.5 * asked[0] * len(asked[1:])
    assert set(intervals(pipeline, run_id).values()) == {4}


def test_a_change_is_collected_within_max_age_and_shrinks_its_pages_interval(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(recrawl_spec(books_spec, site.base_url, grow=1.0, shrink=0.5, max_age_days=2))
    night(pipeline, site)
    run_id, _ = night(pipeline, site)
    assert set(intervals(pipeline, run_id).values()) == {2}
    site.set_catalogue(books=RECORDS, version=1, changed_fraction=0.03)
    changed = {b.id: b for b in site.catalogue.books if b.changed_in == 1}
    moved = {site.catalogue.listing_path((i - 1) // 20 + 1) for i in changed}

    # The night of the change: every page's interval (2 days) has a day left, so nobody asks yet.
    stale, asked = night(pipeline, site)
    assert asked == Counter()
    assert pipeline.summary(CRAWL, stale)["records"]["changed"] == 0
    # The next night every page is two days old, max_age: all asked, the change collected, a night late.
    caught, asked = night(pipeline, site)
    assert set(asked) == {site.catalogue.listing_path(n) for n in range(1, PAGES + 1)}
    summary = pipeline.summary(CRAWL, caught)
    assert (summary["records"]["total"], summary["records"]["changed"]) == (RECORDS, len(changed))
    prices = {r["url"].rsplit("_", 1)[1].split("/")[0]: r["price"] for r in pipeline.records(CRAWL, caught)}
    assert {int(i): p for i, p in prices.items() if int(i) in changed} == {
        i: b.price_pence / 100 for i, b in changed.items()
    }
    # Changed pages shrink to a day (2 x 0.5), unchanged ones stay at max_age.
    after = intervals(pipeline, caught)
    assert {p for p, days in after.items() if days == 1} == {p.lstrip("/") for p in moved}
    assert {p for p, days in after.items() if days == 2} == {
        site.catalogue.listing_path(n).lstrip("/") for n in range(1, PAGES + 1)
    } - {p.lstrip("/") for p in moved}
    # A day later only the changed pages are due again.
    _, asked = night(pipeline, site)
    assert set(asked) == moved


def test_seeds_always_are_asked_every_night_while_the_pages_they_lead_to_wait_their_interval(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=0, urls=["/catalogue/page-1.html"], max_depth=None)
    data["recrawl"] = {"grow": 1.0, "seeds": "always"}
    pipeline.spec(data)
    _, first = night(pipeline, site)
    _, second = night(pipeline, site)
    run_id, third = night(pipeline, site)

    every = {site.catalogue.listing_path(n) for n in range(1, PAGES + 1)}
    assert (set(first), set(second)) == (every, every)
    assert set(third) == {"/catalogue/page-1.html"}  # the seed; the links' intervals (2 days) have not run out
    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["pages"]["not_due_by"]["schedule"], summary["records"]["total"]) == (PAGES - 1, RECORDS)


def test_a_sitemaps_lastmod_decides_where_there_is_one(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=0, max_depth=0)
    data["seeds"] = {"sitemaps": {"urls": [f"{site.base_url}/sitemap-index.xml"]}}
    data["recrawl"] = {"min_interval_days": 3}
    pipeline.spec(data)
    night(pipeline, site)
    # Published tonight (the pipeline's tonight): pages whose lastmod moved, though the schedule would wait.
    site.set_catalogue(books=RECORDS, version=1, changed_fraction=0.02, published=pipeline.clock())
    changed = [b for b in site.catalogue.books if b.changed_in == 1]
    moved = {site.catalogue.detail_path(b) for b in changed} | {
        site.catalogue.listing_path((b.id - 1) // 20 + 1) for b in changed
    }
    run_id, asked = night(pipeline, site)

    assert set(asked) == moved
    pages = pipeline.summary(CRAWL, run_id)["pages"]
    listed = RECORDS + PAGES
    assert (pages["not_due"], pages["not_due_by"]) == (
        listed - len(moved),
        {"sitemap": listed - len(moved), "schedule": 0},
    )


def test_without_the_section_every_page_is_asked_every_night_and_tasks_and_results_are_as_before(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    night(pipeline, site)
    pipeline.clock.advance(DAY_S)
    run_id = pipeline.harness.start(CRAWL)
    messages = pipeline.receive(10)
    tasks = [task for m in messages for task in json.loads(m.body)["tasks"]]
    assert len(tasks) == PAGES
    # No recrawl fields (no ``iv``); the digests travel in base85 (``z``), so ten messages of ten fit in 64 KB.
    assert all(set(task["prior"]) == {"etag", "lm", "body", "n", "d", "z", "c", "ft"} for task in tasks)
    pipeline.deliver(messages)
    pipeline.drain()
    pipeline.finalize()

    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["pages"]["not_modified"], summary["pages"]["not_due"]) == (PAGES, 0)
    assert "not_due_by" not in summary["pages"]
    assert all("iv" not in result_plain(e.result) for e in pipeline.services.frontier.scan(run_id) if e.result)


@pytest.mark.parametrize("runner", ["local", "emulated"])
def test_sluice_run_on_either_runner_takes_a_clock_and_says_how_many_pages_the_schedule_left_unasked(
    runner: str, tmp_path: Path, site: RunningDemoSite, books_spec: SpecData
) -> None:
    specs = tmp_path / "crawls"
    specs.mkdir()
    (specs / f"{CRAWL}.yaml").write_text(
        yaml.safe_dump(recrawl_spec(books_spec, site.base_url, grow=1.0)), encoding="utf-8"
    )
    spec = load_spec(specs / f"{CRAWL}.yaml")
    clock = ShiftedClock()
    if runner == "emulated":
        fleet: Any = EmulatedRunner(specs, tmp_path / "state", workers=2, allow_loopback=True, clock=clock)
    else:
        fleet = LocalFleet(specs, tmp_path / "state", workers=2, allow_loopback=True, clock=clock)
    asked = []
    for _ in range(3):
        clock.advance(DAY_S)
        site.reset()
        run = fleet.run(spec)
        asked.append(sum(pages_asked(site).values()))

    assert asked == [PAGES, PAGES, 0]
    pages = as_json(run)["pages"]
    assert {k: pages[k] for k in ("fetched", "not_modified", "not_due", "failed", "skipped")} == {
        "fetched": 0,
        "not_modified": 0,
        "not_due": PAGES,
        "failed": 0,
        "skipped": 0,
    }
    assert pages["not_due_by"] == {"sitemap": 0, "schedule": PAGES}
    text = as_text(run)
    assert "  pages    fetched 0, not modified 0, not due 5 (schedule 5, sitemap 0), failed 0, skipped 0" in text
    assert f"  records  {RECORDS} (new 0, changed 0, unchanged {RECORDS})" in text

"""What a site or an unlucky crash can do to a run, and the run still ends whole and counted right.

Each test here was a way to lose records or stall a run that a review of the data path found; each
runs on both adapter sets.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sluice.domain.layout import seeds_key
from sluice.domain.pages import url_hash
from sluice.messages import StartEvent, UrlTask
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.start.fanout import StartFailed, catalog_run, start_run
from sluice.pipeline.visit.links import parent_id
from sluice_tools.demosite import RunningDemoSite

from .conftest import Pipeline, SpecData

CRAWL = "books"


def test_a_link_too_long_to_queue_is_dropped_and_counted_never_fatal_to_its_page(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=0, urls=["/_test/long-link?chars=3000"], max_depth=1)
    data["follow"]["selectors"] = ["a"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    pages = summary["pages"]
    assert (summary["status"], pages["fetched"], pages["failed"], pages["links_dropped"]) == ("finished", 2, 0, 1)
    assert site.stats.count("/_test/status/200") == 1  # the short link was followed
    assert pipeline.dead_letters() == []


def test_an_etag_longer_than_a_task_takes_does_not_break_the_next_runs_fan_out(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url, urls=["/_test/long-etag?chars=2000"]))
    pipeline.run(CRAWL)
    site.stats.reset()

    second = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, second)
    assert (summary["status"], summary["pages"]["enqueued"]) == ("finished", 6)
    [request] = site.stats.records("/_test/long-etag")
    assert request.if_none_match is None  # fetched whole: its validator could not travel
    assert summary["pages"]["not_modified"] == 5  # the listing pages' validators did


def test_a_changed_spec_fetches_every_page_whole_so_a_page_without_records_cannot_answer_304(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, urls=["/_test/etag/hub"])
    pipeline.spec(data)
    pipeline.run(CRAWL)
    data["extract"]["fields"]["rating"]["process"] = ["strip"]  # a different spec: its records may differ
    pipeline.spec(data)
    site.stats.reset()

    second = pipeline.run(CRAWL)

    assert all(r.if_none_match is None for r in site.stats.records("/_test/etag/hub"))
    t = pipeline.tally(CRAWL, second)
    assert (t.fetched, t.not_modified) == (6, 0)
    assert t.records_changed == 100  # every rating changed form; the digests still told them apart


def test_an_unfinished_run_is_never_the_next_runs_catalog(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    complete = pipeline.run(CRAWL)
    cut_short = pipeline.start(CRAWL)
    finalize_run(CRAWL, cut_short, pipeline.services, force=True)  # finalized as it stood: nothing visited
    pipeline.finalize_shards()  # on AWS its shard tasks come through the finalize queue
    assert pipeline.summary(CRAWL, cut_short)["status"] == "unfinished"

    catalog = catalog_run(pipeline.services, CRAWL)

    assert catalog is not None
    assert catalog.run_id == complete
    pipeline.drain()  # the cut-short run's messages: dropped, their run is closed
    third = pipeline.run(CRAWL)
    assert pipeline.run_state(CRAWL, third).catalog_run == complete
    assert pipeline.summary(CRAWL, third)["pages"]["not_modified"] == 5


def test_a_run_whose_lock_is_taken_over_after_its_deadline_is_finalized_not_forgotten(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    overdue = pipeline.start(CRAWL)
    pipeline.clock.advance(pipeline.services.tuning.run_deadline_hours * 3600 + 1)  # past its deadline, no waiting

    answer = start_run(StartEvent(crawl=CRAWL), pipeline.services, time_left=lambda: 900.0)
    pipeline.finalize_shards()  # the overdue run's shard tasks, which the start queued (on AWS)

    assert answer.run_id != overdue
    assert pipeline.run_state(CRAWL, overdue).status == "finished"
    assert pipeline.summary(CRAWL, overdue)["status"] == "unfinished"
    assert pipeline.active_run_id(CRAWL) == answer.run_id


def test_a_link_claimed_but_never_sent_is_sent_again_once_the_run_stops_moving(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=1, max_depth=2))
    run_id = pipeline.start(CRAWL)
    page_1 = f"{site.base_url}/catalogue/page-1.html"
    # Page 1 leads on to pages 2 and 3 (max_depth 2); page 5 is reached only through the stranded claim.
    stranded = UrlTask(url=f"{site.base_url}/catalogue/page-5.html", depth=2, origin="link", parent=parent_id(page_1))
    # Claimed by page 1, whose visit then died; its redelivery failed for good and never sent it.
    run = pipeline.run_state(CRAWL, run_id)
    assert pipeline.services.frontier.claim(run_id, [stranded], seeds=run.seeds, max_pages=500).won == [stranded]
    pipeline.drain()
    pipeline.finalize()
    assert pipeline.run_state(CRAWL, run_id).status == "running"  # the claim waits: not drained

    assert pipeline.sweep() == []  # counts it, not drained
    assert pipeline.sweep() == []  # the same count a sweep later: stalled, so the waiting link is sent again
    pipeline.drain()
    assert [f["run_id"] for f in pipeline.sweep()] == [run_id]  # the next sweep finds it drained

    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["status"], summary["pages"]["links"], summary["records"]["total"]) == ("finished", 3, 80)
    assert site.stats.count("/catalogue/page-5.html") == 1
    assert url_hash(stranded.url) in {e.url_hash for e in pipeline.services.frontier.scan(run_id) if e.done}


def test_a_url_still_waiting_when_the_invocation_runs_short_goes_back_and_the_batch_is_written(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=1, urls=["/_test/slow/a?seconds=4&bytes=100"], max_depth=0))
    run_id = pipeline.start(CRAWL)
    batch = pipeline.receive(10)
    assert len(batch) == 1  # both URLs in one message

    failed = pipeline.invoke(batch, time_left_s=22.0)  # 2 s of budget past the margin for writing

    assert failed == {batch[0].id}
    t = pipeline.tally(CRAWL, run_id)
    assert (t.done, t.fetched) == (1, 1)  # the fast page was written and counted
    pipeline.make_visible(batch)
    pipeline.drain()
    assert pipeline.tally(CRAWL, run_id).done == 2


@pytest.mark.parametrize("records", [2_500])
def test_a_record_shared_by_a_page_too_big_for_digests_is_still_written_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, records: int
) -> None:
    """A page of over 2,000 records keeps no digests; the finalizer reads its keys to find shared ones."""
    data = books_spec(CRAWL, site.base_url, pages=0, urls=["/_test/many-records?n=2500", "/_test/many-records?n=5"])
    data["extract"] = {
        "item": "li",
        "fields": {"name": {"selector": "::text", "required": True}},
        "key": ["name"],
    }
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    keys = Counter(r["_key"] for r in pipeline.records(CRAWL, run_id))
    assert len(keys) == records
    assert max(keys.values()) == 1
    assert pipeline.summary(CRAWL, run_id)["records"]["duplicates_dropped"] == 5


def test_the_records_table_gets_each_new_or_changed_record_once_per_batch_and_nothing_unchanged(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = books_spec(CRAWL, site.base_url)
    data["output"] = {"records_table": True}
    pipeline.spec(data)
    table = pipeline.services.records
    assert table is not None
    calls: list[list[str]] = []
    real = table.upsert

    def upsert(crawl: str, run_id: str, records: Any) -> None:
        calls.append([r.key for r in records])
        real(crawl, run_id, records)

    monkeypatch.setattr(table, "upsert", upsert)
    pipeline.run(CRAWL)
    first = [key for call in calls for key in call]
    assert len(first) == len(set(first)) == 100
    assert all(len(call) == len(set(call)) for call in calls)  # one BatchWriteItem names an item once
    sample = first[0]
    stored = table.get(CRAWL, sample)
    assert stored is not None
    assert stored["record_key"] == sample

    calls.clear()
    site.set_catalogue(books=100, version=1, changed_fraction=0.05)
    second = pipeline.run(CRAWL)

    changed = pipeline.tally(CRAWL, second).records_changed
    assert changed == 5
    assert sum(len(call) for call in calls) == changed  # the unchanged 95 cost no write


@pytest.mark.parametrize("closed", ["1", "0"])
def test_a_page_nested_too_deep_to_parse_fails_with_its_reason_and_its_batch_goes_on(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, closed: str
) -> None:
    """100,000 nested <div>s (1.1 MB) took lexbor 55 s, stalling every page in flight beside it."""
    data = books_spec(CRAWL, site.base_url, pages=3, urls=[f"/_test/deep?depth=100000&closed={closed}"])
    data["follow"]["selectors"] = ["a[href^='/_test/']"]  # the deep page's one link, were it parsed
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    pages = summary["pages"]
    assert (summary["status"], pages["fetched"], pages["failed"]) == ("finished", 3, 1)
    assert summary["records"]["total"] == 3 * 20  # the catalogue pages in its batch are whole
    entries = pipeline.services.frontier.scan(run_id)
    [deep] = [e for e in entries if "/_test/deep" in e.url]
    assert deep.result is not None
    assert deep.result.reason == "HTML nests more than 1024 elements deep: not parsed (parse time grows with depth)"
    assert site.stats.count("/_test/status/200") == 0  # its link was never parsed out
    assert pipeline.dead_letters() == []


def test_a_page_whose_extraction_would_pass_its_time_budget_fails_alone_with_its_reason(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """A legal pattern costs RE2 up to 2.5 ns per instruction per character: on 1.5 MB, more than the page's second."""
    data = books_spec(CRAWL, site.base_url, pages=3, urls=["/_test/long-text?chars=1500000"])
    del data["extract"]["pages"]  # the long page is a product card too
    data["extract"]["fields"]["blurb"] = {"selector": "p.blurb::text", "process": [{"regex": "(.*){30}x"}]}
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)

    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["status"], summary["pages"]["fetched"], summary["pages"]["failed"]) == ("finished", 4, 1)
    assert summary["records"]["total"] == 4 * 20  # its neighbours (and page 4, page 3's next) are whole
    [long] = [e for e in pipeline.services.frontier.scan(run_id) if "/_test/long-text" in e.url]
    assert long.result is not None
    assert long.result.reason is not None
    assert long.result.reason.startswith("extraction step over its bound of 1 s: regex '(.*){30}x' on 1,")
    assert pipeline.dead_letters() == []


def test_records_whose_key_fell_back_are_counted_in_the_summary(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=2, max_depth=0)
    data["extract"]["fields"]["upc"] = {"selector": "span.upc-the-listing-does-not-have::text"}
    data["extract"]["key"] = ["upc"]
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)
    records = pipeline.summary(CRAWL, run_id)["records"]
    assert (records["total"], records["fallback_keys"]) == (40, 40)  # each keyed by its url field instead
    assert all(r["_key"].startswith("http") for r in pipeline.records(CRAWL, run_id))


@pytest.mark.parametrize("fatal", [False, True])
def test_a_crawl_cut_short_by_max_depth_says_so_and_can_be_made_unhealthy(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, fatal: bool
) -> None:
    """Page 1 (depth 0) links page 2 (depth 1, the limit), which links page 3: not followed, and said."""
    data = books_spec(CRAWL, site.base_url, pages=1, max_depth=1)
    data["alerts"]["fail_when_truncated"] = fatal
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["pages"]["fetched"] == 2
    assert summary["limits"]["max_depth"] == {"limit": 1, "links_left": 1}
    assert summary["limits"]["max_pages"] == {"limit": 500, "links_left": 0}
    checks = {c["check"]: c for c in summary["verdict"]["checks"]}
    assert checks["truncated"]["message"].startswith("max_depth (1) reached: up to 1 link(s) beyond it not followed")
    assert checks["truncated"]["ok"] is not fatal
    assert summary["verdict"]["healthy"] is not fatal


def test_a_crawl_cut_short_by_max_pages_counts_the_new_links_it_left(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=1, max_depth=None, max_pages=3)
    data["follow"].pop("max_depth")  # the default: no depth limit, max_pages bounds the crawl
    pipeline.spec(data)
    run_id = pipeline.run(CRAWL)
    summary = pipeline.summary(CRAWL, run_id)
    assert summary["pages"]["fetched"] == 3  # pages 1, 2, 3; page 3's link to page 4 is over the cap
    assert summary["limits"]["max_pages"] == {"limit": 3, "links_left": 1}
    checks = {c["check"]: c for c in summary["verdict"]["checks"]}
    assert checks["truncated"]["message"].startswith("max_pages (3) reached: 1 new link(s) left unvisited")
    assert summary["verdict"]["healthy"] is True


def test_a_crawl_that_reaches_no_limit_says_so(pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url, pages=0, urls=["/_test/status/200"], max_depth=1))
    summary = pipeline.summary(CRAWL, pipeline.run(CRAWL))
    checks = {c["check"]: c for c in summary["verdict"]["checks"]}
    assert (checks["truncated"]["ok"], checks["truncated"]["message"]) == (True, "no limit cut the crawl short")


def test_records_that_vanish_since_the_catalog_run_are_counted_gone_and_can_alert(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=5, max_depth=0)
    data["alerts"]["max_gone_rate"] = 0.2
    pipeline.spec(data)
    first = pipeline.summary(CRAWL, pipeline.run(CRAWL))
    assert (first["records"]["gone"], first["records"]["in_catalog_run"]) == (None, None)  # nothing to compare

    site.set_catalogue(books=60)  # 3 listing pages: pages 4 and 5 now answer 404, their 40 books are gone
    second = pipeline.summary(CRAWL, pipeline.run(CRAWL))
    assert second["records"]["total"] == 60
    assert (second["records"]["gone"], second["records"]["in_catalog_run"]) == (40, 100)
    alerts = {a["check"]: a for a in second["verdict"]["alerts"]}
    assert alerts["records_gone"]["message"] == "40 of the last run's 100 records are gone (rate 0.400, ceiling 0.200)"

    third = pipeline.summary(CRAWL, pipeline.run(CRAWL))  # the same 60 again: nothing more is gone
    assert third["records"]["gone"] == 0
    assert "records_gone" not in {a["check"] for a in third["verdict"]["alerts"]}


def _seed_file(pipeline: Pipeline, name: str, lines: list[str]) -> None:
    """What an operator's `aws s3 cp` does: the file where the scheduler reads."""
    pipeline.services.objects.put(seeds_key(CRAWL, name), ("\n".join(lines) + "\n").encode(), "text/plain")


def test_seeds_can_come_from_a_file_streamed_line_by_line(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=1, max_depth=0)
    data["seeds"]["file"] = "books-seeds.txt"
    data["follow"]["allowed_domains"] = ["127.0.0.1"]
    pipeline.spec(data)
    listing = [f"{site.base_url}/catalogue/page-{n}.html" for n in (2, 3, 4)]
    _seed_file(pipeline, "books-seeds.txt", ["# listing pages", *listing, "", listing[0]])  # a repeat is one seed
    summary = pipeline.summary(CRAWL, pipeline.run(CRAWL))
    assert (summary["pages"]["seeds"], summary["pages"]["fetched"], summary["records"]["total"]) == (4, 4, 80)


def test_a_seed_file_url_the_template_also_makes_is_one_seed_and_the_run_finishes(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """Listed twice (template and file) it was sent twice: one seed too many, and a run that never drained."""
    data = books_spec(CRAWL, site.base_url, pages=3, max_depth=0)  # the template: pages 1 and 2
    data["seeds"]["file"] = "books-seeds.txt"
    data["follow"]["allowed_domains"] = ["127.0.0.1"]
    pipeline.spec(data)
    _seed_file(pipeline, "books-seeds.txt", [f"{site.base_url}/catalogue/page-{n}.html" for n in (2, 3)])
    run_id = pipeline.run(CRAWL)  # asserts the run was finalized once the queue drained
    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["pages"]["seeds"], summary["pages"]["fetched"], summary["records"]["total"]) == (3, 3, 60)
    assert summary["status"] == "finished"
    assert [r.path for r in site.stats.records()].count("/catalogue/page-2.html") == 1


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (
            ["http://127.0.0.1:1/a", "https://user:pw@127.0.0.1/x"],
            "seeds.file books-seeds.txt line 2: 'https://user:pw@",
        ),
        ([f"http://127.0.0.1:1/p{n}" for n in range(600)], "more seeds than follow.max_pages (500)"),
    ],
)
def test_a_seed_file_the_run_cannot_carry_closes_the_run_with_the_reason(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, lines: list[str], why: str
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=1, max_depth=0)
    data["seeds"]["file"] = "books-seeds.txt"
    data["follow"]["allowed_domains"] = ["127.0.0.1"]
    pipeline.spec(data)
    _seed_file(pipeline, "books-seeds.txt", lines)
    with pytest.raises(StartFailed, match="start failed: ") as failed:
        start_run(StartEvent(crawl=CRAWL), pipeline.services, time_left=lambda: 900.0)
    assert why in str(failed.value)
    assert pipeline.services.ledger.active_run(CRAWL) is None
    assert why in pipeline.summary(CRAWL, failed.value.run_id)["stopped"]

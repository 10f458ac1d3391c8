"""`sluice crawl`, the engine alone: the demo site over real sockets, records to JSON Lines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.crawl.engine import crawl
from sluice_tools.crawl.sinks import JsonlSink
from sluice_tools.demosite import RunningDemoSite, running_demo_site


@pytest.fixture(scope="module")
def site() -> Iterator[RunningDemoSite]:
    with running_demo_site(books=100) as running:
        yield running


def spec_for(site: RunningDemoSite, *urls: str) -> CrawlSpec:
    return parse_spec(
        {
            "name": "engine",
            "seeds": {
                "urls": [f"{site.base_url}{u}" for u in urls],
                "template": f"{site.base_url}/catalogue/page-{{n}}.html",
                "range": {"start": 1, "stop": 2},
            },
            "follow": {"selectors": ["a[href^='/_test/']"], "max_depth": 1},
            "extract": {
                "item": "article.product_pod",
                "fields": {"title": {"selector": "h3 a::attr(title)", "required": True}},
            },
            "politeness": {"concurrency": 4, "obey_robots": False, "timeout_seconds": 5},
        }
    )


@pytest.mark.timeout(60)
def test_a_page_too_deep_to_parse_is_counted_failed_and_the_crawl_goes_on(
    site: RunningDemoSite, tmp_path: Path
) -> None:
    out = tmp_path / "records.jsonl"
    with JsonlSink(out) as sink:
        tally = asyncio.run(crawl(spec_for(site, "/_test/deep?depth=100000"), sink, allow_loopback=True))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert (tally.fetched, tally.failed, len(records)) == (2, 1, 40)
    assert list(tally.failures) == ["HTML nests more than 1024 elements deep: not parsed (parse time grows with depth)"]


@pytest.mark.parametrize(("follow", "capped", "beyond"), [({"max_depth": 1}, 0, 1), ({"max_pages": 2}, 1, 0)])
def test_the_engine_counts_what_its_limits_left_out(
    site: RunningDemoSite, tmp_path: Path, follow: dict[str, int], capped: int, beyond: int
) -> None:
    spec = parse_spec(
        {
            "name": "engine",
            "seeds": [f"{site.base_url}/catalogue/page-1.html"],
            "follow": {"selectors": ["li.next a"], **follow},
            "extract": {"item": "article.product_pod", "fields": {"title": "h3 a::attr(title)"}},
            "politeness": {"concurrency": 2, "obey_robots": False},
        }
    )
    with JsonlSink(tmp_path / "records.jsonl") as sink:
        tally = asyncio.run(crawl(spec, sink, allow_loopback=True))
    assert (tally.fetched, tally.capped_links, tally.beyond_depth) == (2, capped, beyond)


@pytest.mark.timeout(60)
def test_sluice_crawl_takes_page_types_and_carries_fields_along_their_rules(
    site: RunningDemoSite, tmp_path: Path
) -> None:
    """The engine types a page by the rule that led there, as the pipeline does, and merges what was carried."""
    from sluice_tools.crawl.summary import summarize

    spec = parse_spec(
        {
            "name": "engine-types",
            "seeds": {"template": f"{site.base_url}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": 2}},
            "follow": {"max_depth": 1},
            "types": {
                "listing": {
                    "pages": r"/catalogue/page-\d+\.html$",
                    "extract": {
                        "item": "article.product_pod",
                        "fields": {
                            "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"]},
                            "price": {"selector": "p.price_color::text", "process": ["strip", "price"]},
                        },
                        "key": ["url"],
                    },
                    "follow": {"books": {"selectors": ["article.product_pod h3 a"], "carry": ["price"]}},
                },
                "book": {
                    "via": ["books"],
                    "extract": {"fields": {"name": "div.product_main h1::text", "url": "::page_url"}, "key": ["url"]},
                },
            },
            "politeness": {"concurrency": 4, "obey_robots": False, "timeout_seconds": 5},
        }
    )
    out = tmp_path / "records.jsonl"
    with JsonlSink(out) as sink:
        tally = asyncio.run(crawl(spec, sink, allow_loopback=True))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    cards = {r["url"]: r for r in records if r["_type"] == "listing"}
    books = [r for r in records if r["_type"] == "book"]
    assert len(cards) == len(books) == 40
    assert all(b["price"] == cards[b["url"]]["price"] and b["name"] for b in books)
    summary = summarize(spec, tally, out, 1.0)
    assert summary["by_type"] == {"book": 40, "listing": 40}
    assert "  types    listing 40 records, book 40 records" in summary["text"].splitlines()


@pytest.mark.timeout(60)
def test_a_link_too_long_for_a_run_is_dropped_and_counted_by_the_engine_as_by_the_pipeline(
    site: RunningDemoSite, tmp_path: Path
) -> None:
    """main's `sluice crawl` fetched a 3,004-character link the pipeline drops: extraction now leaves it out."""
    spec = spec_for(site, "/_test/long-link?chars=3000")
    with JsonlSink(tmp_path / "records.jsonl") as sink:
        tally = asyncio.run(crawl(spec, sink, allow_loopback=True))
    assert tally.links_dropped == 1
    assert site.stats.count("/_test/status/200") >= 1  # the short link was followed
    long_paths = [r.path for r in site.stats.records("/_test/status/200") if "pad=" in r.target]
    assert long_paths == []

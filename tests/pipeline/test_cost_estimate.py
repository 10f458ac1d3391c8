"""Each run's summary carries its own estimated AWS cost, from its own counts; the sizes it prices are DynamoDB's."""

from __future__ import annotations

import json

import pytest

from sluice.adapters.aws import codec
from sluice.adapters.aws.items import to_item
from sluice.domain.pages import PageResult, PartBlock, RecordCounts, UrlEntry, record_digests, url_hash
from sluice.metrics import RunMetric
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.meter.dynamo_size import item_size

from .conftest import Pipeline, SpecData

CRAWL = "books"


def test_summary_prices_one_write_per_url_and_splits_per_page_from_per_run_costs(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    run_id = pipeline.run(CRAWL)
    cost = pipeline.summary(CRAWL, run_id)["cost"]

    work, once = cost["usage"]["per_page_work"], cost["usage"]["per_run"]
    assert work["write_units"] == 5 + 1  # five results of under 1 KB, one batch's progress report
    assert work["s3_puts"] == 2  # the batch's part, the output file
    assert work["lambda_requests"] == 1
    assert once["lambda_requests"] == 2  # the scheduler and the finalizer
    assert abs(sum(cost["lines_usd"].values()) - cost["estimated_usd"]) < 1e-5
    assert cost["per_million_pages_usd"] > 0
    assert cost["fixed_per_run_usd"] > 0


def test_the_finalizer_emits_the_summarys_cost_estimate_as_a_run_metric(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dashboard's cost per run is this metric: it must be the estimate the summary states."""
    pipeline.spec(books_spec(CRAWL, site.base_url))
    capsys.readouterr()
    run_id = pipeline.run(CRAWL)
    estimated = pipeline.summary(CRAWL, run_id)["cost"]["estimated_usd"]
    [document] = [d for d in map(json.loads, _json_lines(capsys.readouterr().out)) if "_aws" in d]
    [directive] = document["_aws"]["CloudWatchMetrics"]
    assert {"Name": RunMetric.ESTIMATED_COST.value, "Unit": "None"} in directive["Metrics"]
    assert estimated > 0
    assert document[RunMetric.ESTIMATED_COST.value] == [estimated]


def _json_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("{")]


def test_the_estimate_sizes_a_url_item_as_dynamodb_counts_the_item_written() -> None:
    url = "https://books.example/catalogue/page-12.html"
    result = PageResult(
        url=url,
        depth=0,
        origin="seed",
        outcome="fetched",
        status=200,
        etag='"5f2c-1a2b3c4d5e6f7a8b"',
        last_modified="Sun, 29 Nov 2026 21:00:00 GMT",
        body_hash="0123456789abcdef0123456789abcdef",
        counts=RecordCounts(new=20),
        items=20,
        digests=record_digests((f"https://books.example/b/{n}", f"h{n}") for n in range(20)),
        block=PartBlock("8f14e45fceea167a5a36dedd4bea2543", 123_456, 6_543),
        ms=312,
    )
    run_id = "20261201T000000Z-abcdef"
    exact = item_size(to_item(codec.result_item(run_id, url_hash(url), result, 1_800_000_001)))
    assert codec.stored_bytes(run_id, UrlEntry(url_hash(url), url, 0, "seed", None, result)) == exact
    assert exact < 1024  # one write unit for a 20-record page

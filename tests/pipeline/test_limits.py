"""Limits moto does not enforce, held by construction: a URL's result item stays far inside DynamoDB's 400 KB."""

from __future__ import annotations

from dataclasses import replace

from sluice.adapters.aws import codec
from sluice.adapters.aws.items import to_item
from sluice.domain.pages import MAX_DIGESTS, MAX_REASON, PageResult, url_hash
from sluice.domain.recrawl import MAX_INTERVAL_S
from sluice.fetch.outcomes import Failed, Fetched, Validators
from sluice.messages import UrlTask
from sluice.pipeline.visit.page_results import failed_result, fetched_visit
from sluice.spec import parse_spec
from sluice_tools.meter.dynamo_size import item_size

DYNAMODB_ITEM_LIMIT = 400 * 1024
FETCHED_AT = 1_796_000_000
URL = "https://books.example/huge.html"
SPEC = parse_spec(
    {
        "name": "huge",
        "seeds": [URL],
        "extract": {"item": "li", "fields": {"name": {"selector": "::text", "required": True}}, "key": ["name"]},
    }
)


def result_item_bytes(result: PageResult) -> int:
    return item_size(to_item(codec.result_item("20261201T000000Z-abcdef", url_hash(URL), result, 1)))


def test_a_page_of_fifty_thousand_records_keeps_no_digests_and_fits_one_item() -> None:
    body = ("<ul>" + "".join(f"<li>record {n}</li>" for n in range(50_000)) + "</ul>").encode()
    page = Fetched(URL, URL, 200, "text/html", body, Validators('"e"', None), 1, 0.1)
    done = fetched_visit(SPEC, UrlTask(url=URL), None, page, FETCHED_AT)
    assert done.result.records == 50_000
    assert done.result.digests == b""  # more than MAX_DIGESTS records: classified as all new next run
    assert result_item_bytes(done.result) < 2 * 1024


def test_a_page_at_the_digest_limit_keeps_them_inside_the_item_limit() -> None:
    body = ("<ul>" + "".join(f"<li>record {n}</li>" for n in range(MAX_DIGESTS)) + "</ul>").encode()
    page = Fetched(URL, URL, 200, "text/html", body, Validators('"e"', None), 1, 0.1)
    done = fetched_visit(SPEC, UrlTask(url=URL), None, page, FETCHED_AT)
    assert len(done.result.digests) == MAX_DIGESTS * 16
    assert result_item_bytes(done.result) < DYNAMODB_ITEM_LIMIT / 10
    # With a recrawl interval of a year (the most a task carries), still far inside the limit.
    assert result_item_bytes(replace(done.result, interval=MAX_INTERVAL_S)) < DYNAMODB_ITEM_LIMIT / 10


def test_a_failure_reason_a_site_can_make_long_is_cut_short() -> None:
    reason = "redirect to " + "https://x.example/" + "a" * 100_000 + " refused"
    result = failed_result(UrlTask(url=URL), Failed(URL, reason, retryable=False))
    assert len(result.reason or "") == MAX_REASON
    assert result_item_bytes(result) < 1024

"""Records reused from the catalog run keep their stored codes: items and messages written before the rename
(when ``reused`` was called ``carried``) still decode, and new ones are written as the old code read them."""

from __future__ import annotations

import json

from sluice.adapters.aws.codec import result_from_plain, result_plain
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.pages import PageResult, Prior, RecordCounts
from sluice.messages import CrawlMessage, PriorState, parse_body

# A not-modified page's result as the ledger held it before the rename: "y" said its records were carried.
OLD_ITEM = {
    "u": {"S": "https://b.example/a"},
    "d": {"N": "0"},
    "g": {"S": "s"},
    "o": {"S": "n"},
    "h": {"N": "304"},
    "e": {"S": '"v1"'},
    "c": {"L": [{"N": "0"}, {"N": "0"}, {"N": "20"}, {"N": "20"}]},
    "y": {"BOOL": True},
    "ft": {"N": "1796000000"},
}
# A task in flight before the rename: its prior's "c" said the catalog run's output held the page's records.
OLD_MESSAGE = (
    '{"v":2,"crawl":"books","run_id":"20261201T000000Z-0a1b2c",'
    '"tasks":[{"url":"https://b.example/a","depth":0,"origin":"seed","parent":null,'
    '"prior":{"etag":"\\"v1\\"","lm":null,"body":"ab12","n":20,"d":"","c":true,"ft":1796000000},'
    '"again":false,"lastmod":null}]}'
)


def test_a_result_stored_before_the_rename_decodes_as_reused() -> None:
    result = result_from_plain(from_item(OLD_ITEM))
    assert (result.outcome, result.status, result.reused, result.records) == ("not_modified", 304, True, 20)
    assert result.prior().reused


def test_a_reused_result_is_stored_under_the_code_old_items_have() -> None:
    result = PageResult(
        url="https://b.example/a",
        depth=0,
        origin="seed",
        outcome="not_modified",
        status=304,
        etag='"v1"',
        counts=RecordCounts(unchanged=20),
        items=20,
        reused=True,
        fetched_at=1_796_000_000,
    )
    assert to_item(result_plain(result)) == OLD_ITEM


def test_a_message_sent_before_the_rename_decodes_with_its_prior_reused() -> None:
    message = parse_body(CrawlMessage, OLD_MESSAGE)
    prior_state = message.tasks[0].prior
    assert prior_state is not None
    prior = prior_state.prior()
    assert (prior.reused, prior.reusable, prior.records, prior.etag) == (True, True, 20, '"v1"')


def test_a_reused_prior_is_sent_under_the_code_old_fetchers_read() -> None:
    prior = Prior(etag='"v1"', body_hash="ab12", records=20, reused=True, fetched_at=1_796_000_000)
    sent = json.loads(PriorState.of(prior).model_dump_json())
    assert sent["c"] is True
    assert "reused" not in sent

"""When a sitemap's lastmod lets a page go unrequested, and what its result keeps for the next run."""

from __future__ import annotations

import pytest

from sluice.adapters.aws.codec import result_from_plain, result_plain
from sluice.domain.pages import PageResult, PartBlock, Prior, RecordCounts
from sluice.messages import PriorState

FETCHED_AT = 1_796_000_000


@pytest.mark.parametrize(
    ("prior", "lastmod", "not_due"),
    [
        (Prior(records=20, reused=True, fetched_at=FETCHED_AT), FETCHED_AT - 1, True),
        (Prior(records=0, fetched_at=FETCHED_AT), FETCHED_AT - 1, True),  # nothing to reuse: nothing lost
        (Prior(records=20, reused=True, fetched_at=FETCHED_AT), FETCHED_AT, False),  # the same second may be later
        (Prior(records=20, reused=True, fetched_at=FETCHED_AT), FETCHED_AT + 60, False),
        (Prior(records=20, reused=True, fetched_at=FETCHED_AT), None, False),  # no lastmod: fetched as usual
        (Prior(records=20, reused=True), FETCHED_AT - 1, False),  # never fetched successfully
        (Prior(records=20, reused=False, fetched_at=FETCHED_AT), FETCHED_AT - 1, False),  # its block is not whole
    ],
)
def test_a_page_is_not_due_only_when_fetched_after_its_lastmod_and_its_records_can_be_reused(
    prior: Prior, lastmod: int | None, not_due: bool
) -> None:
    assert prior.not_due(lastmod) is not_due


def test_the_fetch_time_travels_through_the_store_and_the_task_and_a_page_not_due_keeps_its_records() -> None:
    result = PageResult(
        url="https://b.example/",
        depth=0,
        origin="seed",
        outcome="not_due",
        counts=RecordCounts(unchanged=20),
        reused=True,
        fetched_at=FETCHED_AT,
    )
    assert result_plain(result)["ft"] == FETCHED_AT
    assert result_from_plain(result_plain(result)) == result
    assert result.holds_records
    prior = PriorState.of(result.prior()).prior()
    assert (prior.fetched_at, prior.reused, prior.records) == (FETCHED_AT, True, 20)


def test_what_a_listing_carried_round_trips_through_the_stores_plain_form() -> None:
    result = PageResult(
        "https://shop.example/list",
        0,
        "seed",
        "fetched",
        carried_block=PartBlock("p1", 10, 20),
        carry_stale=True,
        carry_dropped={"note": 2},
    )
    plain = result_plain(result)
    assert (plain["kw"], plain["cs"], plain["cd"]) == (["p1", 10, 20], True, {"note": 2})
    assert result_from_plain(plain) == result

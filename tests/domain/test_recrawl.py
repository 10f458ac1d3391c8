"""The recrawl schedule's arithmetic: intervals grow on no change, shrink on change, stay within their bounds,
and a page is due at the run nearest its interval's end; what a result and a task keep of it."""

from __future__ import annotations

import pytest

from sluice.adapters.aws.codec import result_from_plain, result_plain
from sluice.domain.pages import MAX_DIGESTS, MAX_URL, RECORD_DIGEST_BYTES, PageResult, Prior, RecordCounts
from sluice.domain.recrawl import DAY_S, MAX_INTERVAL_S, Schedule
from sluice.messages import (
    MAX_ETAG,
    MAX_LM,
    MESSAGE_BYTES,
    MalformedMessage,
    PriorState,
    UrlTask,
    pack,
    parse_body,
)
from sluice.spec.models import MAX_CARRY_BYTES

NIGHTLY = Schedule(min_interval=DAY_S, max_age=7 * DAY_S, grow=0.4, shrink=0.2)
FETCHED_AT = 1_796_000_000


def test_an_unchanged_page_grows_its_interval_by_grow_and_a_changed_one_shrinks_it_by_shrink() -> None:
    assert NIGHTLY.next_interval(2 * DAY_S, changed=False) == round(2 * DAY_S * 1.4)
    assert NIGHTLY.next_interval(2 * DAY_S, changed=True) == round(2 * DAY_S * 0.8)


def test_intervals_stay_between_min_interval_and_max_age() -> None:
    assert NIGHTLY.next_interval(DAY_S, changed=True) == DAY_S  # 0.8 days is under the minimum
    assert NIGHTLY.next_interval(6 * DAY_S, changed=False) == 7 * DAY_S  # 8.4 days is over the maximum
    assert NIGHTLY.interval(30 * DAY_S) == 7 * DAY_S  # kept under a spec whose max_age was longer
    assert NIGHTLY.interval(60) == DAY_S


def test_a_page_without_an_interval_starts_at_min_interval() -> None:
    assert NIGHTLY.interval(None) == DAY_S
    assert NIGHTLY.next_interval(None, changed=False) == round(DAY_S * 1.4)
    assert NIGHTLY.next_interval(None, changed=True) == DAY_S


def test_static_nights_grow_the_interval_geometrically_up_to_max_age() -> None:
    interval: int | None = None
    seen = []
    for _ in range(8):
        interval = NIGHTLY.next_interval(interval, changed=False)
        seen.append(round(interval / DAY_S, 2))
    assert seen == [1.4, 1.96, 2.74, 3.84, 5.38, 7.0, 7.0, 7.0]


@pytest.mark.parametrize(
    ("age_days", "interval_days", "due"),
    [
        (1.0, 1.0, True),
        (0.9, 1.0, True),  # tonight's run started a little earlier than last night's
        (0.5, 1.0, True),  # half of min_interval early: the nearest run to the interval's end
        (0.49, 1.0, False),
        (1.0, 1.4, True),  # 1.4 nights round to the next night
        (1.0, 1.96, False),  # 1.96 nights round to two
        (2.0, 1.96, True),
        (6.0, 7.0, False),
        (6.5, 7.0, True),  # at the run nearest max_age, never later
        (7.0, 30.0, True),  # however long an interval it kept, max_age holds
    ],
)
def test_a_page_is_due_once_less_than_half_of_min_interval_is_left_of_its_interval(
    age_days: float, interval_days: float, due: bool
) -> None:
    now = FETCHED_AT + round(age_days * DAY_S)
    assert NIGHTLY.due(FETCHED_AT, round(interval_days * DAY_S), now) is due


def test_a_page_never_fetched_is_due_and_seeds_are_due_every_run_only_when_the_spec_says_always() -> None:
    assert NIGHTLY.due(None, 7 * DAY_S, FETCHED_AT) is True
    assert NIGHTLY.due(FETCHED_AT, 7 * DAY_S, FETCHED_AT + DAY_S, seed=True) is False
    always = Schedule(min_interval=DAY_S, max_age=7 * DAY_S, seeds_always=True)
    assert always.due(FETCHED_AT, 7 * DAY_S, FETCHED_AT + DAY_S, seed=True) is True
    assert always.due(FETCHED_AT, 7 * DAY_S, FETCHED_AT + DAY_S, seed=False) is False


@pytest.mark.parametrize(
    ("bounds", "problem"),
    [
        ({"min_interval": 2 * DAY_S, "max_age": DAY_S}, "min_interval"),
        ({"min_interval": 0, "max_age": DAY_S}, "min_interval"),
        ({"min_interval": DAY_S, "max_age": MAX_INTERVAL_S + 1}, "max_age"),
        ({"min_interval": DAY_S, "max_age": DAY_S, "shrink": 1.0}, "shrink"),
        ({"min_interval": DAY_S, "max_age": DAY_S, "grow": 0.0}, "grow"),
    ],
)
def test_a_schedule_out_of_its_bounds_is_refused_naming_them(bounds: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Schedule(**bounds)  # type: ignore[arg-type]


def test_the_interval_travels_through_the_store_and_the_task() -> None:
    result = PageResult(
        url="https://b.example/",
        depth=0,
        origin="seed",
        outcome="fetched",
        status=200,
        counts=RecordCounts(unchanged=20),
        fetched_at=FETCHED_AT,
        interval=3 * DAY_S,
    )
    assert result_plain(result)["iv"] == 3 * DAY_S
    assert result_from_plain(result_plain(result)) == result
    prior = PriorState.of(result.prior()).prior()
    assert (prior.fetched_at, prior.interval) == (FETCHED_AT, 3 * DAY_S)


def test_without_an_interval_a_result_and_a_task_are_as_they_were() -> None:
    result = PageResult(url="https://b.example/", depth=0, origin="seed", outcome="fetched", fetched_at=FETCHED_AT)
    assert "iv" not in result_plain(result)
    state = PriorState.of(Prior(records=3, fetched_at=FETCHED_AT))
    assert state.model_dump_json() == '{"etag":null,"lm":null,"body":null,"n":3,"d":"","c":false,"ft":1796000000}'


def test_a_task_whose_interval_is_out_of_bounds_is_malformed_naming_it() -> None:
    body = {"url": "https://b.example/", "prior": {"ft": FETCHED_AT, "iv": MAX_INTERVAL_S + 1}}
    with pytest.raises(MalformedMessage, match=r"prior\.iv"):
        parse_body(UrlTask, body)


def test_the_largest_task_with_an_interval_still_fits_one_message_under_64_kb() -> None:
    prior = Prior(
        etag='"' + "e" * (MAX_ETAG - 2) + '"',
        last_modified="m" * MAX_LM,
        body_hash="b" * 64,
        records=MAX_DIGESTS,
        digests=b"\xff" * (MAX_DIGESTS * RECORD_DIGEST_BYTES),
        reused=True,
        fetched_at=FETCHED_AT,
        interval=MAX_INTERVAL_S,
    )
    url = "https://b.example/" + "a" * (MAX_URL - len("https://b.example/"))
    carry = {"note": "c" * (MAX_CARRY_BYTES - len('{"note":""}'))}
    task = UrlTask(url=url, depth=3, origin="link", prior=PriorState.of(prior), lastmod=FETCHED_AT, carry=carry)
    [(_, body)] = list(pack("books", "20261201T000000Z-abcdef", [task], urls_per_message=10))
    assert len(body.encode()) < MESSAGE_BYTES
    assert f'"iv":{MAX_INTERVAL_S}' in body

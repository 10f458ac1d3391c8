"""The spec's recrawl section: its defaults, its bounds named when broken, and a digest it leaves alone."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.domain.recrawl import DAY_S, Schedule
from sluice.spec import SpecError, parse_spec


def spec(**recrawl: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "books",
        "seeds": ["https://books.example/catalogue/page-1.html"],
        "extract": {"item": "article.product_pod", "fields": {"title": "h3 a::attr(title)"}},
    }
    return data | ({"recrawl": recrawl} if recrawl else {})


def test_an_empty_section_is_nutchs_adaptive_schedule_for_a_nightly_crawl() -> None:
    recrawl = parse_spec(spec() | {"recrawl": {}}).recrawl
    assert recrawl is not None
    assert recrawl.schedule() == Schedule(min_interval=DAY_S, max_age=7 * DAY_S, grow=0.4, shrink=0.2)


def test_without_the_section_or_with_adaptive_off_there_is_no_schedule() -> None:
    assert parse_spec(spec()).recrawl is None
    recrawl = parse_spec(spec(adaptive=False, max_age_days=3)).recrawl
    assert recrawl is not None
    assert recrawl.schedule() is None


def test_days_may_be_fractions_and_seeds_may_be_asked_always() -> None:
    recrawl = parse_spec(spec(min_interval_days=0.25, max_age_days=2.5, seeds="always")).recrawl
    assert recrawl is not None
    assert recrawl.schedule() == Schedule(min_interval=6 * 3600, max_age=216_000, seeds_always=True)


@pytest.mark.parametrize(
    ("recrawl", "expected"),
    [
        ({"min_interval_days": 3, "max_age_days": 2}, "recrawl: max_age_days (2) is shorter than min_interval_days"),
        ({"min_interval_days": 0}, "recrawl.min_interval_days: Input should be greater than or equal to 0.04"),
        ({"max_age_days": 400}, "recrawl.max_age_days: Input should be less than or equal to 365"),
        ({"shrink": 1}, "recrawl.shrink: Input should be less than 1"),
        ({"grow": 0}, "recrawl.grow: Input should be greater than 0"),
        ({"seeds": "sometimes"}, "recrawl.seeds: 'sometimes' is not one of: 'scheduled' or 'always'"),
        ({"max_age": 7}, "recrawl.max_age: unknown key"),
    ],
)
def test_each_mistake_names_its_field(recrawl: dict[str, Any], expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec(**recrawl))
    assert any(line.startswith(expected) for line in caught.value.errors), caught.value.errors


def test_the_section_leaves_the_digest_alone_so_turning_it_on_reuses_the_catalogs_records() -> None:
    plain = parse_spec(spec()).digest()
    assert parse_spec(spec(grow=1.0, max_age_days=3)).digest() == plain
    assert parse_spec(spec(adaptive=False)).digest() == plain

"""The one backoff: its ceilings double from the base up to the cap, its waits stay inside their bounds, its
loops end."""

from __future__ import annotations

import random

import pytest

from sluice.domain.backoff import Backoff


def test_the_ceiling_doubles_from_the_base_up_to_the_cap() -> None:
    backoff = Backoff(base=0.5, cap=30.0)
    assert [backoff.ceiling(n) for n in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff.ceiling(-3) == 0.5
    assert backoff.ceiling(10**6) == 30.0  # a huge retry number neither overflows nor passes the cap


@pytest.mark.parametrize(("floor", "low"), [(0.0, 0.0), (0.5, 0.5)])
@pytest.mark.parametrize("retry", [0, 2, 9])
def test_a_wait_lies_between_its_floor_share_and_its_ceiling_and_spreads_over_them(
    floor: float, low: float, retry: int
) -> None:
    backoff = Backoff(base=10.0, cap=900.0, floor=floor)
    ceiling = backoff.ceiling(retry)
    rng = random.Random(3)
    draws = [backoff.delay(retry, rng) for _ in range(500)]
    assert all(low * ceiling <= d <= ceiling for d in draws)
    assert min(draws) < low * ceiling + 0.1 * ceiling
    assert max(draws) > 0.9 * ceiling


def test_the_same_seed_gives_the_same_waits() -> None:
    backoff = Backoff(base=0.05, cap=1.0, floor=0.5)
    assert list(backoff.waits(8, random.Random(1))) == list(backoff.waits(8, random.Random(1)))


@pytest.mark.parametrize("tries", [1, 2, 8])
def test_a_loop_of_n_tries_waits_n_minus_one_times_each_capped(tries: int) -> None:
    waits = list(Backoff(base=0.05, cap=1.0).waits(tries, random.Random(5)))
    assert len(waits) == tries - 1
    assert all(0 <= w <= 1.0 for w in waits)


@pytest.mark.parametrize(
    "make", [lambda: Backoff(-1.0, 1.0), lambda: Backoff(1.0, -1.0), lambda: Backoff(1.0, 2.0, floor=1.5)]
)
def test_a_backoff_out_of_its_bounds_is_refused(make: object) -> None:
    with pytest.raises(ValueError, match="base and cap"):
        make()  # type: ignore[operator]


def test_a_loop_of_no_tries_is_refused() -> None:
    with pytest.raises(ValueError, match="tries 0"):
        list(Backoff(1.0, 2.0).waits(0))

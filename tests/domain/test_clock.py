"""The pipeline's clock: epoch seconds and an aware UTC moment that agree, and test clocks that move only on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sluice.domain.clock import SYSTEM_CLOCK, Clock, FixedClock, ShiftedClock

AT = datetime(2026, 12, 1, 21, 0, 0, tzinfo=UTC)


def test_a_fixed_clock_stands_still_until_moved_and_its_two_readings_agree() -> None:
    clock = FixedClock(AT)
    assert (clock(), clock.now()) == (AT.timestamp(), AT)
    clock.advance(90.5)
    assert clock.now() == AT + timedelta(seconds=90.5)
    assert clock() == AT.timestamp() + 90.5
    assert clock.now().tzinfo is UTC


def test_a_shifted_clock_runs_with_the_wall_clock_a_day_ahead_once_advanced() -> None:
    clock = ShiftedClock()
    clock.advance(86400)
    before = SYSTEM_CLOCK()
    shifted = clock()
    after = SYSTEM_CLOCK()
    assert before + 86400 <= shifted <= after + 86400
    assert abs(clock.now().timestamp() - clock()) < 5  # the same moment, as a datetime


@pytest.mark.parametrize("clock", [FixedClock(AT), ShiftedClock()], ids=["fixed", "shifted"])
def test_a_test_clock_never_moves_back(clock: FixedClock | ShiftedClock) -> None:
    with pytest.raises(ValueError, match="forward only"):
        clock.advance(-1)


def test_every_clock_is_a_clock_and_a_fixed_one_needs_a_zone() -> None:
    assert all(isinstance(c, Clock) for c in (SYSTEM_CLOCK, FixedClock(AT), ShiftedClock()))
    assert SYSTEM_CLOCK.now().tzinfo is UTC
    with pytest.raises(ValueError, match="aware"):
        FixedClock(datetime(2026, 12, 1))  # naive: the mistake this refuses

"""Backoff arithmetic, Retry-After parsing and the retry status decision."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from sluice.fetch.retry import RetryRules, parse_retry_after
from sluice.spec import RetryPolicy


@pytest.mark.parametrize(("attempt", "ceiling"), [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (6, 30.0), (500, 30.0)])
def test_backoff_is_full_jitter_below_the_capped_ceiling(attempt: int, ceiling: float) -> None:
    rules = RetryRules.from_policy(RetryPolicy(backoff_base_seconds=0.5, backoff_max_seconds=30.0))
    rng = random.Random(7)
    draws = [rules.delay(attempt, rng) for _ in range(400)]
    assert all(0.0 <= d <= ceiling for d in draws)
    assert max(draws) > 0.9 * ceiling  # spread over the whole range, not clustered at the bottom
    assert min(draws) < 0.1 * ceiling


def test_backoff_is_reproducible_with_a_seeded_rng() -> None:
    rules = RetryRules.from_policy(RetryPolicy(backoff_base_seconds=0.1, backoff_max_seconds=5.0))
    first = [rules.delay(a, random.Random(1)) for a in range(5)]
    assert first == [rules.delay(a, random.Random(1)) for a in range(5)]


NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("Sat, 01 Mar 2025 12:00:30 GMT", 30.0),
        ("Saturday, 01-Mar-25 12:01:00 GMT", 60.0),  # obsolete RFC 850 form
        ("Sat, 01 Mar 2025 11:00:00 GMT", 0.0),  # in the past: retry now
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_parse_retry_after_round_trips_an_http_date() -> None:
    when = datetime.fromtimestamp(NOW + 45, tz=UTC)
    assert parse_retry_after(format_datetime(when, usegmt=True), NOW) == pytest.approx(45.0)


def test_should_retry_follows_the_policy_codes() -> None:
    rules = RetryRules.from_policy(RetryPolicy())
    assert [c for c in (404, 408, 410, 429, 500, 501, 503) if rules.should_retry(c)] == [408, 429, 500, 503]
    assert not RetryRules.from_policy(RetryPolicy(status_codes=[503])).should_retry(429)

"""The missing-run rule: a crawl is missing a run only once its own schedule period and an hour have passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sluice.domain.schedule import run_missing, schedule_period_s

FINISHED = datetime(2026, 11, 1, 3, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "period_s"),
    [
        ("rate(15 minutes)", 900),
        ("rate(1 hour)", 3600),
        ("rate(14 days)", 14 * 86400),
        ("cron(*/10 * * * ? *)", 600),
        ("cron(0 */6 * * ? *)", 6 * 3600),
        ("cron(17 3 * * ? *)", 86400),
        ("cron(0 3 ? * MON *)", 7 * 86400),
        ("cron(0 3 ? * MON,THU *)", 7 * 86400 // 2),
        ("cron(0 3 1 * ? *)", 31 * 86400),
    ],
)
def test_a_schedule_fires_this_often(expression: str, period_s: int) -> None:
    assert schedule_period_s(expression) == period_s


@pytest.mark.parametrize(
    ("expression", "quiet_for", "missing"),
    [
        # Monthly: 20 days after a run is between runs, not a missing run; 32 days is.
        ("cron(0 3 1 * ? *)", timedelta(days=20), False),
        ("cron(0 3 1 * ? *)", timedelta(days=31, minutes=59), False),
        ("cron(0 3 1 * ? *)", timedelta(days=32), True),
        # Every 14 days: more than the 7 days a CloudWatch alarm can look back, judged all the same.
        ("rate(14 days)", timedelta(days=10), False),
        ("rate(14 days)", timedelta(days=14, minutes=59), False),
        ("rate(14 days)", timedelta(days=14, hours=1, seconds=1), True),
        # Nightly: a day and an hour of grace.
        ("cron(17 3 * * ? *)", timedelta(hours=25), False),
        ("cron(17 3 * * ? *)", timedelta(hours=25, seconds=1), True),
    ],
)
def test_a_run_is_missing_only_past_its_own_period_and_an_hour(
    expression: str, quiet_for: timedelta, missing: bool
) -> None:
    assert run_missing(expression, FINISHED.isoformat(), FINISHED + quiet_for) is missing


def test_a_crawl_that_never_finished_a_run_is_not_judged() -> None:
    assert run_missing("rate(1 hour)", None, FINISHED + timedelta(days=400)) is False

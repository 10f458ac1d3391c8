"""A crawl's schedule: how often it fires, and whether its last run is too long ago (the missing-run rule).

The rule is checked by the finalizer's sweep, not by a CloudWatch window: an alarm's period times its
evaluation periods can be no longer than seven days (one day under an hour's period), so a monthly or
``rate(14 days)`` crawl would alarm between its runs if silence were judged in CloudWatch alone.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_RATE = re.compile(r"rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}

MISSING_RUN_GRACE_S = 3600
"""How late a run may finish past its schedule period before it counts as missing: an hour."""


def schedule_period_s(expression: str) -> int:
    """How often a schedule fires, in seconds: exact for rate(), the coarsest field that varies for cron()."""
    rate = _RATE.fullmatch(expression.strip())
    if rate:
        return int(rate.group(1)) * _UNIT_S[rate.group(2).rstrip("s")]
    fields = expression.strip()[len("cron(") : -1].split()
    minutes, hours, day_of_month, _month, day_of_week = fields[:5]
    if minutes in ("*", "?") or "/" in minutes:
        return 60 * (int(minutes.split("/")[1]) if "/" in minutes else 1)
    if hours in ("*", "?") or "/" in hours:
        return 3600 * (int(hours.split("/")[1]) if "/" in hours else 1)
    if day_of_week not in ("*", "?"):
        return 7 * 86400 // max(1, len(day_of_week.split(",")))
    if day_of_month not in ("*", "?"):
        return 31 * 86400
    return 86400


def run_missing(expression: str, last_finished_at: str | None, now: datetime) -> bool:
    """True when no run has finished within the schedule's period plus :data:`MISSING_RUN_GRACE_S` of ``now``.

    A crawl that never finished a run is not judged (there is no time to count from): its first run
    starts the clock. ``last_finished_at`` is the newest finished run's ISO time, as the ledger holds it.
    """
    if last_finished_at is None:
        return False
    allowed = timedelta(seconds=schedule_period_s(expression) + MISSING_RUN_GRACE_S)
    return now - datetime.fromisoformat(last_finished_at) > allowed

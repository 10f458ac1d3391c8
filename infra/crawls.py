"""The crawl specs the stack deploys: each with a schedule gets a rule; every one gets its alarms."""

from __future__ import annotations

import ipaddress
import math
from pathlib import Path

from sluice.spec import CrawlSpec, load_spec, spec_files

CRAWLS = Path(__file__).resolve().parents[1] / "crawls"


def local_only(spec: CrawlSpec) -> bool:
    """A spec whose every host is this machine (the demo): the deployed functions would refuse it."""
    return all(_loopback(host) for host in spec.domains())


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def deployed_specs(folder: Path = CRAWLS) -> list[CrawlSpec]:
    """Every spec in ``crawls/`` but the local-only ones, validated; a bad spec fails the synth with its errors."""
    specs = [s for s in (load_spec(p, named_after_file=True) for p in spec_files(folder)) if not local_only(s)]
    names = [s.name for s in specs]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"crawls/: more than one spec named {', '.join(sorted(duplicates))}")
    return specs


MAX_ALARM_RANGE_S = 7 * 86400
"""CloudWatch evaluates an alarm over at most seven days (period times evaluation periods)..."""
MAX_SHORT_ALARM_RANGE_S = 86400
"""...and over at most one day when the period is under an hour (PutMetricAlarm's limits)."""


def alarm_range_allowed(period_s: int, evaluations: int) -> bool:
    """Would CloudWatch take an alarm of this period and this many evaluation periods?"""
    limit = MAX_SHORT_ALARM_RANGE_S if period_s < 3600 else MAX_ALARM_RANGE_S
    return period_s % 60 == 0 and evaluations >= 1 and period_s * evaluations <= limit


def missing_run_period_s(sweep_minutes: int) -> int:
    """The missing-run alarm's period: whole hours holding at least two sweeps, so one late sweep is no silence.

    The sweep judges every scheduled crawl (``sluice.domain.schedule.run_missing``) and emits ``RunMissing``
    for each; the alarm needs one period, whatever the schedule: a monthly crawl is judged by the sweep
    against its own period, never by a CloudWatch window it could not fit in.
    """
    return max(1, math.ceil(2 * sweep_minutes / 60)) * 3600

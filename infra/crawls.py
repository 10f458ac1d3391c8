"""The crawl specs the stack deploys: each with a schedule gets a rule; every one gets its alarms."""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path

from sluice.spec import CrawlSpec, load_spec, spec_files

CRAWLS = Path(__file__).resolve().parents[1] / "crawls"
_RATE = re.compile(r"rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


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


MAX_ALARM_WINDOW_S = 7 * 86400
"""CloudWatch evaluates an alarm over at most seven days."""


def missing_run_window(expression: str, grace_s: int = 3600) -> tuple[int, int]:
    """(alarm period, evaluation periods) that cover one schedule period plus grace.

    The missing-run alarm fires when every one of those periods had no RunHealthy datum.
    Windows longer than CloudWatch's seven days are cut to seven days.
    """
    window = min(schedule_period_s(expression) + grace_s, MAX_ALARM_WINDOW_S)
    for period in (300, 3600, 21600, 86400):
        evaluations = math.ceil(window / period)
        if evaluations <= 100 and period * evaluations <= MAX_ALARM_WINDOW_S:
            return period, evaluations
    return 86400, 7

"""A page's retries: their full-jitter backoff (:mod:`sluice.domain.backoff`), Retry-After parsing and which
statuses are retried."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from sluice.domain.backoff import Backoff
from sluice.spec import RetryPolicy

_DELTA = re.compile(r"\d{1,10}")


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date); None if unusable.

    ``now`` is the current Unix time; a date in the past means "now" (0.0).
    """
    if value is None:
        return None
    text = value.strip()
    if _DELTA.fullmatch(text):
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class RetryRules:
    """The spec's retry policy as decisions."""

    times: int
    status_codes: frozenset[int]
    backoff_base_s: float
    backoff_max_s: float
    retry_after_max_s: float

    @classmethod
    def from_policy(cls, policy: RetryPolicy) -> RetryRules:
        """Rules for a spec's :class:`RetryPolicy`."""
        return cls(
            policy.times,
            frozenset(policy.status_codes),
            policy.backoff_base_seconds,
            policy.backoff_max_seconds,
            policy.retry_after_max_seconds,
        )

    def should_retry(self, status: int) -> bool:
        """Whether a response with ``status`` is worth another attempt."""
        return status in self.status_codes

    @property
    def backoff(self) -> Backoff:
        """Full jitter: a wait anywhere from 0 to the capped ceiling."""
        return Backoff(self.backoff_base_s, self.backoff_max_s)

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The backoff before retry number ``retry`` (0-based)."""
        return self.backoff.delay(retry, rng)

"""Adaptive recrawl: when a page known from earlier runs is asked again, as Nutch's adaptive fetch schedule does.

Each page keeps an interval (seconds) in its result. A fetch that finds the page unchanged
grows it by ``grow`` (x (1 + grow)), one that finds it changed shrinks it by ``shrink``
(x (1 - shrink)), always within ``[min_interval, max_age]``; a page is asked again once its
age since its last successful fetch reaches the interval. So a page that has not changed in
k runs is asked about every (1 + grow)^k runs, and never less often than every ``max_age``.

Runs come at their schedule's times, not at a page's: a nightly run may start minutes earlier
than last night's, or reach a page sooner in its fan-out. A page is therefore due at the run
nearest to the end of its interval: when less than half of ``min_interval`` of it is left
(:data:`Schedule.slack`). With runs every ``min_interval`` an interval of 1.4 runs is asked
every run, one of 1.96 every second run. Nutch needs no such rounding: its generate step runs
whenever it likes and compares the exact fetch time.

Nutch's ``SYNC_DELTA`` (shifting the next fetch towards a page's Last-Modified) has no part
here: a page whose sitemap gives a lastmod is decided by it instead (it knows, a schedule
guesses), and a page's own Last-Modified is already asked with If-Modified-Since when it is due.
"""

from __future__ import annotations

from dataclasses import dataclass

DAY_S = 86_400
MAX_INTERVAL_S = 365 * DAY_S
"""The longest interval a page keeps (and a task carries): Nutch's default ``MAX_INTERVAL``, a year."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A spec's ``recrawl`` section in the pipeline's units: seconds."""

    min_interval: int
    max_age: int
    grow: float = 0.4
    shrink: float = 0.2
    seeds_always: bool = False
    """The spec's seeds (pages at depth 0) are asked every run, whatever their interval."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_interval <= self.max_age <= MAX_INTERVAL_S:
            raise ValueError(f"need 1 <= min_interval ({self.min_interval}) <= max_age ({self.max_age}) <= a year")
        if self.grow <= 0 or not 0 < self.shrink < 1:
            raise ValueError(f"need grow > 0 ({self.grow}) and 0 < shrink < 1 ({self.shrink})")

    @property
    def slack(self) -> int:
        """How early a page is due: half of ``min_interval``, so it is asked at the run nearest its interval's end."""
        return self.min_interval // 2

    def clamp(self, interval: float) -> int:
        return int(min(self.max_age, max(self.min_interval, round(interval))))

    def interval(self, kept: int | None) -> int:
        """A page's interval now: the one its result kept, within this spec's bounds; ``min_interval`` if none."""
        return self.clamp(kept if kept is not None else self.min_interval)

    def due(self, fetched_at: int | None, kept: int | None, now: int, *, seed: bool = False) -> bool:
        """Whether a page last fetched at ``fetched_at`` with interval ``kept`` is asked at ``now``.

        A page never fetched successfully is due; so is one whose age reached ``max_age`` (the
        interval never exceeds it), and a seed when ``seeds_always``."""
        if fetched_at is None or (seed and self.seeds_always):
            return True
        return now - fetched_at >= self.interval(kept) - self.slack

    def next_interval(self, kept: int | None, *, changed: bool) -> int:
        """The interval after a fetch: grown if the page was unchanged, shrunk if it changed, within the bounds."""
        factor = (1.0 - self.shrink) if changed else (1.0 + self.grow)
        return self.clamp(self.interval(kept) * factor)

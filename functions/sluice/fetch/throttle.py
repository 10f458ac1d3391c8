"""Adaptive per-host concurrency: the AutoThrottle idea, driven by the host's own latency and answers.

A host's target concurrency starts at the spec's cap (or where the fleet last left it), is cut by
half on a 429 or 503 and by a quarter when its latency has doubled over the lowest it has shown,
and grows by one after ``target`` answers in a row whose latency stays near that floor. It never
exceeds the cap and never drops below one. After a cut it waits ``target`` answers before cutting
again, so one slow burst is one step down, not a collapse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EWMA_WEIGHT = 0.3
RISE = 2.0
"""Latency this many times the floor (and ``RISE_SLACK_MS`` over it) says the host is straining."""
RISE_SLACK_MS = 20.0
"""...so that on a fast host a few milliseconds of jitter are no signal."""
FLAT = 1.25
FLAT_SLACK_MS = 10.0
THROTTLE_STATUSES = frozenset({429, 503})


@dataclass
class Throttle:
    """One host's target concurrency (``adaptive=False``: always the cap)."""

    cap: int
    adaptive: bool = True
    target: int = 0
    floor_ms: float | None = None
    ewma_ms: float | None = None
    _streak: int = 0
    _cooldown: int = 0
    cuts: int = field(default=0)
    """Times this throttle lowered the target (for logs and tests)."""

    def __post_init__(self) -> None:
        self.target = self.cap if not self.target or not self.adaptive else max(1, min(self.cap, self.target))

    def on_answer(self, latency_ms: float, status: int) -> None:
        """Fold one answer in (its latency to the first byte of the head, and its status)."""
        if not self.adaptive:
            return
        if status in THROTTLE_STATUSES:
            if self._cooldown > 0:  # answers to requests sent before the last cut say nothing new
                self._cooldown -= 1
            else:
                self._cut(self.target // 2)
            return
        self.floor_ms = latency_ms if self.floor_ms is None else min(self.floor_ms, latency_ms)
        self.ewma_ms = (
            latency_ms if self.ewma_ms is None else EWMA_WEIGHT * latency_ms + (1 - EWMA_WEIGHT) * self.ewma_ms
        )
        if self._cooldown > 0:
            self._cooldown -= 1
            return
        floor, ewma = self.floor_ms, self.ewma_ms
        if ewma > RISE * floor and ewma - floor > RISE_SLACK_MS:
            self._cut(self.target * 3 // 4)
        elif ewma <= FLAT * floor + FLAT_SLACK_MS:
            self._streak += 1
            if self._streak >= self.target and self.target < self.cap:
                self.target += 1
                self._streak = 0
        else:
            self._streak = 0

    def _cut(self, to: int) -> None:
        new = max(1, min(self.target - 1, to))
        if new < self.target:
            self.cuts += 1
        self.target = new
        self._streak = 0
        self._cooldown = self.target

    @property
    def below_cap(self) -> int | None:
        """The target when adaptation holds it under the cap (what the fleet must remember), else None."""
        return self.target if self.adaptive and self.target < self.cap else None

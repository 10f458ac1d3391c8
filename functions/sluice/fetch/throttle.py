"""Adaptive per-host concurrency: the AutoThrottle idea, driven by the host's own latency and answers.

A host's target concurrency starts at the spec's cap (or where the fleet last left it), is cut by
half on a 429 or 503 and by a quarter when its latency has doubled over the lowest it has shown,
and grows by one after ``target`` answers in a row whose latency stays near that floor. It never
exceeds the cap and never drops below one. After a cut it waits ``target`` answers before cutting
again, so one slow burst is one step down, not a collapse.

The latency judged is the host's, not our event loop's: a sample is the time from sending a request
to the coroutine seeing its head, and a loop busy parsing other pages delays that coroutine although
the answer is already in the socket (measured: 50 ms pages at 32 in flight on a busy 2-vCPU machine
cut a flat host to one request at a time, 16-18 pages/s against 60-94 without adaptation). So the
fetcher measures its loop's lag (:class:`LoopLag`, a tick every ``LAG_TICK_S`` noting how late it
ran) and the throttle folds in the sample less the time the loop was busy after the answer could
first have come (sent plus the host's lowest latency), never below zero. Scrapy's AutoThrottle
documents the same effect and keeps it on purpose, reading the latency as how busy Scrapy and the
server are together; here the client's own load is not the host's to pay for.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
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

    def on_answer(self, latency_ms: float, status: int, lag_ms: float = 0.0) -> None:
        """Fold one answer in: its latency to the head, its status, and how late our own loop ran
        while it was out (``lag_ms``, taken off the latency; a sample that is mostly our lag does not
        move the floor, for an overestimated lag would set the floor too low and every later answer
        would look like a doubling)."""
        if not self.adaptive:
            return
        if status in THROTTLE_STATUSES:
            if self._cooldown > 0:  # answers to requests sent before the last cut say nothing new
                self._cooldown -= 1
            else:
                self._cut(self.target // 2)
            return
        own = min(max(lag_ms, 0.0), latency_ms)
        latency_ms -= own
        if own > latency_ms:  # mostly our lag: an overestimate would set the floor too low
            if self.floor_ms is None:
                return  # nothing to judge against yet, and this is no floor to start from
        else:
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


LAG_TICK_S = 0.01
"""How often :class:`LoopLag` looks at its loop: 100 callbacks a second, a few microseconds each."""
LAG_KEEP = 512
"""Late ticks remembered (over five seconds of a loop late at every tick); older ones count as the oldest kept."""
LAG_NOISE_S = 0.001
"""A tick less late than this is the timer's own jitter, not lag, and is not kept."""


class LoopLag:
    """How late an asyncio loop has been running its callbacks: a tick every ``LAG_TICK_S`` notes how
    long after its due time it ran. :meth:`since` adds up how long the loop was busy (late) after a
    moment, the tick due now included if it is already overdue, in seconds. ``clock`` is ``time.monotonic``
    (tests drive :meth:`note` with their own times and never start the ticks)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._late: deque[tuple[float, float]] = deque(maxlen=LAG_KEEP)
        self._due: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Tick on the running loop (a no-op while ticking there; a fetcher used on a new loop starts afresh)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self.stop()
            self._loop = loop
            self._late.clear()
            self._schedule(loop)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._due = None
        self._loop = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._due = self.clock() + LAG_TICK_S
        self._handle = loop.call_later(LAG_TICK_S, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        due, now = self._due, self.clock()
        if due is not None:
            self.note(now, now - due)
        self._schedule(loop)

    def note(self, at: float, late_s: float) -> None:
        """A tick ran at ``at``, ``late_s`` after it was due."""
        if late_s >= LAG_NOISE_S:
            self._late.append((at, late_s))

    def since(self, start: float) -> float:
        """How long the loop was busy (late at its ticks) from ``start`` to now, in seconds (0 if never).

        Each late tick says the loop was busy from its due time until it ran; the tick due now, if it is
        overdue, says the loop is busy still. These stretches do not overlap, and only their parts after
        ``start`` count: give ``start`` as the earliest moment the answer could have been there (sent,
        plus the host's lowest latency), for busy time while the host was still working delayed nothing.
        Between a tick and the next one due the loop may have been busy too; that is not counted, so
        under a saturated loop this says up to one ``LAG_TICK_S`` in each tick too little."""
        now = self.clock()
        due = self._due
        busy = now - max(due, start) if due is not None and now > due and now > start else 0.0
        for at, late in reversed(self._late):
            if at <= start:
                break
            busy += at - max(at - late, start)
        return busy

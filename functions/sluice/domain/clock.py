"""The pipeline's one clock: what every step, rule and adapter takes for "now".

A step reads it from :attr:`sluice.pipeline.services.Services.clock` and hands the moment to the
domain's time rules (``overdue``, ``catalog_fresh``, ...), which never read the time themselves; the
adapters get the same clock in their constructors (leases, TTLs, visibility, ledger stamps). So a
test, the emulated runner or a bench moves time for the whole pipeline at once (:class:`ShiftedClock`)
instead of sleeping, and nights come a day apart in a second.

Calling a clock gives epoch seconds (``services.clock()``, as the recrawl rules and TTLs count);
:meth:`Clock.now` gives the same moment as an aware UTC datetime (as the ledgers stamp runs).
Durations and timeouts are measured with ``time.monotonic()`` where they are measured: they tell how
long something took, not what time it is, and no test needs to move them.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """What the pipeline takes for now."""

    def __call__(self) -> float:
        """Epoch seconds."""
        ...

    def now(self) -> datetime:
        """The same moment, aware, in UTC."""
        ...


class SystemClock:
    """The wall clock: the one Lambda and ``sluice run`` use."""

    def __call__(self) -> float:
        return time.time()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()
"""The one wall clock instance: the default wherever a clock is not passed."""


class ShiftedClock:
    """The wall clock moved by an offset that a test (or a bench) advances: time still runs, so run ids
    keep sorting by start and leases still age, but a night passes with one :meth:`advance`."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self.offset_s = offset_s

    def __call__(self) -> float:
        return time.time() + self.offset_s

    def now(self) -> datetime:
        return datetime.fromtimestamp(self(), UTC)

    def advance(self, seconds: float) -> None:
        """Move the pipeline's time on by ``seconds`` (never back: a ledger's stamps must not run backwards)."""
        if seconds < 0:
            raise ValueError(f"a clock moves forward only (asked to move {seconds} s)")
        self.offset_s += seconds

    def __repr__(self) -> str:
        return f"ShiftedClock(offset_s={self.offset_s})"


class FixedClock:
    """A clock that stands still at a given moment until :meth:`advance` moves it (unit tests of the rules
    and adapters, where every stamp must be known in advance)."""

    def __init__(self, at: datetime) -> None:
        if at.tzinfo is None:
            raise ValueError("a FixedClock needs an aware datetime")
        self._at = at.timestamp()

    def __call__(self) -> float:
        return self._at

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._at, UTC)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock moves forward only (asked to move {seconds} s)")
        self._at += seconds

    def __repr__(self) -> str:
        return f"FixedClock({self.now().isoformat()})"

"""Backoff: how long to wait before the next try, the one rule every retry in the code waits by.

Exponential from ``base``, capped at ``cap``, jittered (so that callers failing together do not come
back together), over a bounded number of tries. The fetcher's retries of a page, the queue's
visibility backoff of a returned message and the DynamoDB adapters' retries of unprocessed batch
items all draw their waits here; they differ only in their numbers and in ``floor``, the share of
the ceiling a wait keeps at least (0: "full jitter", 0.5: "equal jitter").
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

MAX_DOUBLINGS = 62
"""Doublings at most: past them the ceiling is the cap anyway, and ``2.0 ** n`` stays a finite float."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits of ``uniform(floor x ceiling, ceiling)`` before retry ``n`` (0-based): ceiling ``min(cap, base x 2**n)``.

    Bounded in time by ``cap`` a wait; a loop bounds its tries by drawing its waits from :meth:`waits`."""

    base: float
    cap: float
    floor: float = 0.0

    def __post_init__(self) -> None:
        if not (self.base >= 0 and self.cap >= 0 and 0 <= self.floor <= 1):
            raise ValueError(f"{self}: base and cap at least 0, floor from 0 to 1")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number ``retry`` (0-based)."""
        return min(self.cap, self.base * 2.0 ** min(max(retry, 0), MAX_DOUBLINGS))

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The jittered wait before retry number ``retry`` (0-based)."""
        ceiling = self.ceiling(retry)
        return (rng or random).uniform(self.floor * ceiling, ceiling)

    def waits(self, tries: int, rng: random.Random | None = None) -> Iterator[float]:
        """The waits between ``tries`` tries, one fewer than them: a retry loop that draws its waits here ends."""
        if tries < 1:
            raise ValueError(f"tries {tries}: at least 1")
        for retry in range(tries - 1):
            yield self.delay(retry, rng)

"""Rounds: Sluice and the peer measured in turn, A B B A ..., and read back as median (min–max).

A machine drifts while a benchmark runs (a neighbour wakes up, the CPU clocks down); measuring one
client's runs together and then the other's puts the drift between them. In rounds that alternate
their order (round 1: A B, round 2: B A, ...) each client gets the early and the late slot alike.
A cell (page variant × concurrency) is then read as each client's median over its rounds, with its
range beside it, and two clients whose ranges overlap are "within the spread" of each other.

Pure: no processes, no clock. ``bench.run`` runs what :func:`schedule` says; ``bench.report`` and
``bench.publish`` read the rows :func:`combine` makes (and the older rows with ``repeats``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Run = dict[str, Any]
WITHIN = "within the spread"
KEPT = ("round", "turn", "pages_per_s", "cpu_ms_per_page", "ratio_limit", "peak_rss_mb", "wall_s", "other_cpu_pct")
"""What a combined row keeps of each round under ``rounds``: the round, the run's place in the cell's
order (its turn), and its figures."""


def schedule(alternating: Sequence[str], rounds: int, once: Sequence[str] = ()) -> list[tuple[int, str]]:
    """(round, client) in the order to run them: ``alternating`` forwards in even rounds and backwards
    in odd ones (A B, B A, A B, ...), then each client of ``once`` a single time, in round 0."""
    order = [
        (r, client) for r in range(max(1, rounds)) for client in (alternating if r % 2 == 0 else alternating[::-1])
    ]
    return order + [(0, client) for client in once if client not in alternating]


@dataclass(frozen=True)
class Spread:
    """A figure's median over the rounds, and its lowest and highest."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        found = sorted(values)
        if not found:
            raise ValueError("a spread needs at least one value")
        return cls(statistics.median(found), found[0], found[-1])

    def overlaps(self, other: Spread) -> bool:
        """True when the two ranges share a value: neither client is clearly ahead."""
        return self.low <= other.high and other.low <= self.high

    def text(self, digits: int = 2) -> str:
        """'1.37 (1.30–1.45)', or '1.37' when the range rounds to one value (one round)."""
        median, low, high = (f"{v:,.{digits}f}" for v in (self.median, self.low, self.high))
        return median if low == high else f"{median} ({low}–{high})"


def share(pages_per_s: float, cpu_ms: float, concurrency: int, latency_ms: float) -> float:
    """pages/s over the run's limit, min(N ÷ latency, 1000 ÷ CPU-ms a page): what ``ratio_limit`` is."""
    latency_bound = concurrency / (latency_ms / 1000) if latency_ms > 0 else float("inf")
    cpu_bound = 1000 / cpu_ms if cpu_ms > 0 else float("inf")
    return pages_per_s / min(latency_bound, cpu_bound)


def samples(row: Run, latency_ms: float) -> list[Run]:
    """The measured rounds behind a row: its ``rounds``, or an older file's ``repeats`` (which kept no
    share of the limit: it is worked out again), or the row itself when it ran once."""
    if "cpu_ms_per_page" not in row:
        return []
    kept = row.get("rounds") or row.get("repeats") or [row]
    found = []
    for one in kept:
        if "cpu_ms_per_page" not in one:
            continue
        figures = dict(one)
        if "ratio_limit" not in figures:
            pps, cpu = float(one["pages_per_s"]), float(one["cpu_ms_per_page"])
            figures["ratio_limit"] = share(pps, cpu, int(row["concurrency"]), latency_ms)
        found.append(figures)
    return found


def spread(row: Run, field: str, latency_ms: float) -> Spread | None:
    """``field`` of a row over its rounds, or None when the row has no measured round."""
    values = [float(s[field]) for s in samples(row, latency_ms) if s.get(field) is not None]
    return Spread.of(values) if values else None


def combine(runs: Sequence[Run]) -> Run:
    """One row for a client's runs in a cell, in the order they ran: the run with the median CPU a
    page (the lower middle one for an even count) with every round's figures under ``rounds``, and
    the failed rounds counted under ``failed_rounds``. All rounds failed: the first failure."""
    good = [r for r in runs if "cpu_ms_per_page" in r]
    if not good:
        return dict(runs[0])
    middle = sorted(good, key=lambda r: float(r["cpu_ms_per_page"]))[(len(good) - 1) // 2]
    row = dict(middle)
    row["rounds"] = [{k: r.get(k) for k in KEPT} for r in good]
    cpu = Spread.of(float(r["cpu_ms_per_page"]) for r in good)
    row["cpu_ms_per_page_median"] = cpu.median
    row["cpu_ms_per_page_spread"] = [cpu.low, cpu.high]
    if len(good) < len(runs):
        row["failed_rounds"] = [r.get("error", "?") for r in runs if "cpu_ms_per_page" not in r]
    return row


def compare(mine: Spread, theirs: Spread, lower_is_better: bool) -> str:
    """How one client's figure stands against another's, in words: 'ahead' or 'behind' by the
    medians, or 'within the spread' when the two ranges overlap."""
    if mine.overlaps(theirs):
        return WITHIN
    better = mine.median < theirs.median if lower_is_better else mine.median > theirs.median
    return "ahead" if better else "behind"

"""What every benchmark client shares: its command line, core pinning, measuring, reporting.

A client is started as ``python -m bench.client_NAME --base URL --pages P --concurrency N``;
it pins itself to a core, crawls listing pages 1..P, and prints one JSON line (``RESULT ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

RESULT_PREFIX = "RESULT "
ITEMS_PER_PAGE = 20
CLIENT_CORE = 0
SERVER_CORE = 1
RATINGS = frozenset({"One", "Two", "Three", "Four", "Five"})


def pin_to_core(core: int) -> list[int]:
    """Pin this process (all its future threads) to ``core`` when the machine has it; returns the cores used."""
    available = sorted(os.sched_getaffinity(0))
    if core in available and len(available) > 1:
        os.sched_setaffinity(0, {core})
    return sorted(os.sched_getaffinity(0))


def listing_urls(base: str, pages: int) -> list[str]:
    """The listing pages 1..pages of the demo catalogue at ``base``."""
    return [f"{base}/catalogue/page-{n}.html" for n in range(1, pages + 1)]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Stopwatch:
    """Wall and process CPU time (all threads, user + system) between start() and stop()."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    system_s: float = 0.0
    """The kernel's share of cpu_s (sockets, epoll, page faults)."""
    rss_before_mb: float = 0.0
    _wall0: float = 0.0
    _cpu0: float = 0.0
    _sys0: float = 0.0

    def start(self) -> None:
        self.rss_before_mb = peak_rss_mb()
        self._wall0, self._cpu0, self._sys0 = time.perf_counter(), time.process_time(), os.times().system

    def stop(self) -> None:
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = time.process_time() - self._cpu0
        self.system_s = os.times().system - self._sys0


@dataclass
class ClientResult:
    """What one client run reports to the harness."""

    client: str
    concurrency: int
    pages_requested: int
    pages_ok: int
    pages_failed: int
    records: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    rss_before_mb: float = 0.0
    """Peak RSS when the crawl started (imports and set-up), for reading peak_rss_mb."""
    system_s: float = 0.0
    """Kernel CPU seconds within cpu_s."""
    variant: str = ""
    sample: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def emit(self) -> None:
        """Print the result as the last line of stdout, where the harness looks for it."""
        sys.stdout.write(RESULT_PREFIX + json.dumps(asdict(self)) + "\n")
        sys.stdout.flush()


def client_args(description: str, variants: tuple[str, ...] = ("",)) -> argparse.Namespace:
    """Parse a client's command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--base", required=True, help="demo site base URL, e.g. http://127.0.0.1:8123")
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--variant", default=variants[0], choices=variants)
    parser.add_argument("--core", type=int, default=CLIENT_CORE)
    args = parser.parse_args()
    if not args.base.startswith(("http://127.", "http://localhost", "http://[::1]")):
        parser.error("the benchmark only talks to loopback addresses")
    return args


def price_value(text: str) -> float | None:
    """'£51.77' -> 51.77 (what Sluice's ``price`` step does for the demo site's prices)."""
    digits = "".join(c for c in text if c.isdigit() or c == ".")
    try:
        return float(digits)
    except ValueError:
        return None


def rating_word(classes: str) -> str | None:
    """'star-rating Three' -> 'Three'."""
    for word in classes.split():
        if word in RATINGS:
            return word
    return None


def complete(record: dict[str, Any]) -> bool:
    """A record counts only when all four fields were extracted."""
    return all(record.get(k) not in (None, "") for k in ("title", "url", "price", "rating"))

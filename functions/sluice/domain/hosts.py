"""A target host as the whole fleet sees it: its queue group, and what every fetcher must know of it.

Politeness belongs to the host, not to a fetcher process. The frontier queue is a FIFO queue
whose message group is the host (``host:port``): SQS hands a group's messages to one consumer
at a time, so the fetcher holding a batch of a host is the only one talking to it, and the
spec's per-host concurrency is per-host for the fleet. What must outlive that fetcher (the
earliest next request, a Retry-After pause, the adaptive concurrency, the breaker's counts) is
a :class:`HostState`, read when a batch of the host begins and written when it ends: by one
writer at a time, at most once per batch, so never faster than the host's own request rate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

MAX_GROUP_ID = 128
"""SQS message group ids stop at 128 characters; longer host keys go by their hash."""
RUNS_KEPT = 4
"""Breaker counts of this many runs per host (a host item stays a few hundred bytes)."""
MAX_PAUSE_S = 3600.0
"""The longest a host may pause the crawler (Retry-After), and no longer than the run has left: a host that asks
for more is blocked for the run, with the reason, rather than waited for (a pause saved past it is read so too)."""


def host_key(url: str) -> str:
    """``host:port`` of a canonical URL (the default port filled in): the unit of politeness."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if ":" in host:  # an IPv6 literal keeps its brackets, as in the URL
        host = f"[{host}]"
    return f"{host}:{port}"


def group_id(host: str) -> str:
    """The queue's message group for a host key: the key itself, or its hash when SQS would refuse it."""
    if len(host) <= MAX_GROUP_ID and host.isascii() and host.isprintable():
        return host
    return "h:" + hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def blocked_reason(host: str, detail: str) -> str:
    """The skip reason of a URL whose host the breaker paused: the one format :func:`blocked_host` reads."""
    return f"host {host} blocked: {detail}"


def pause_refused(host: str, seconds: float, cap_s: float) -> str:
    """The reason a host is blocked for the run when it asks for a pause longer than the crawler waits."""
    return blocked_reason(host, f"asked to pause for {seconds:.0f} s (Retry-After), more than the {cap_s:.0f} s it may")


def blocked_host(reason: str | None) -> str | None:
    """The host a skip reason says the breaker paused, if it says so (see :func:`blocked_reason`)."""
    if not reason or not reason.startswith("host ") or " blocked: " not in reason:
        return None
    return reason[5 : reason.index(" blocked: ")]


@dataclass(frozen=True, slots=True)
class RunCounts:
    """One run's answers from one host, as the breaker counts them."""

    requests: int = 0
    blocked: int = 0
    """Answers that say the host refuses the crawler: 403, 429, or a page with the spec's block marker."""
    tripped: str | None = None
    """Why the breaker paused the host for the run (None while it has not)."""

    def add(self, requests: int, blocked: int) -> RunCounts:
        return replace(self, requests=self.requests + requests, blocked=self.blocked + blocked)

    @property
    def share(self) -> float:
        return self.blocked / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class HostState:
    """What the fleet knows of one host between batches."""

    host: str
    next_start: float = 0.0
    """Epoch seconds before which no request to the host may start (min delay, Crawl-delay, Retry-After)."""
    paused_until: float = 0.0
    """A Retry-After (or 429 storm) pause: epoch seconds; the host's URLs wait it out in the queue."""
    target: int | None = None
    """The adaptive concurrency the last batch ended with (None: start from the spec's cap)."""
    floor_ms: float | None = None
    """The lowest latency the host has shown: the baseline a rising latency is measured against."""
    runs: Mapping[str, RunCounts] = field(default_factory=dict)
    version: int = 0
    """Bumped on every write; a write that finds another version lost a race and is dropped."""

    def counts(self, run_id: str) -> RunCounts:
        return self.runs.get(run_id, RunCounts())

    def with_counts(self, run_id: str, counts: RunCounts) -> HostState:
        others = sorted((k, v) for k, v in self.runs.items() if k != run_id)  # run ids sort by start time
        return replace(self, runs={**dict(others[-(RUNS_KEPT - 1) :]), run_id: counts})

    def worth_keeping(self, now: float) -> bool:
        """False when the state says nothing a fresh start would not at ``now`` (epoch seconds): then it is not
        written."""
        return (
            self.next_start > now
            or self.paused_until > now
            or self.target is not None
            or any(c.blocked or c.tripped for c in self.runs.values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "next": round(self.next_start, 3),
            "pause": round(self.paused_until, 3),
            "target": self.target,
            "floor": None if self.floor_ms is None else round(self.floor_ms, 1),
            "runs": {k: [c.requests, c.blocked, c.tripped] for k, c in self.runs.items()},
            "v": self.version,
        }

    @classmethod
    def from_json(cls, host: str, data: Mapping[str, Any]) -> HostState:
        runs = {str(k): RunCounts(int(v[0]), int(v[1]), v[2]) for k, v in dict(data.get("runs") or {}).items()}
        target = data.get("target")
        floor = data.get("floor")
        return cls(
            host=host,
            next_start=float(data.get("next") or 0.0),
            paused_until=float(data.get("pause") or 0.0),
            target=None if target is None else int(target),
            floor_ms=None if floor is None else float(floor),
            runs=runs,
            version=int(data.get("v") or 0),
        )

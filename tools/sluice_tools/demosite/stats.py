"""Thread-safe request statistics for tests: concurrency (overall and per host), counts, log."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass
from typing import Any

from .http1 import Request

_Row = tuple[int, str, str, str, str, str | None, str | None, str | None, int, float, int]


@dataclass(frozen=True)
class RequestRecord:
    """One answered (or dropped: status 0) request; `seq` numbers requests in arrival order."""

    seq: int
    method: str
    path: str
    target: str
    host: str
    if_none_match: str | None
    if_modified_since: str | None
    user_agent: str | None
    status: int
    at: float = 0.0
    """When its head was parsed (time.monotonic() of the site's process)."""
    concurrent: int = 0
    """Requests of its host in flight when it began, itself included."""


class DemoStats:
    """Counters by path and by Host header (lower-cased, port dropped); in flight = head parsed
    until the answer is handed to the socket or the connection drops (use latency_ms to overlap)."""

    def __init__(self, log_limit: int = 100_000) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.in_flight_by_host: dict[str, int] = {}
        self.max_in_flight_by_host: dict[str, int] = {}
        self.requests_by_path: Counter[str] = Counter()
        self.min_gap_ms_by_host: dict[str, float] = {}
        """Shortest time between two request starts of one host: what a crawler's spacing looks like here."""
        self._last_start: dict[str, float] = {}
        self._begun: dict[int, tuple[float, int]] = {}
        self._log: deque[_Row] = deque(maxlen=log_limit)
        self._seq = 0
        self.bytes_received = 0
        """Bytes read off the site's connections: the crawler's request heads."""
        self.bytes_sent = 0
        """Bytes written to them: heads and bodies as sent (compressed, chunked)."""
        self.connections = 0
        """Connections opened (keep-alive reuses one for many requests)."""
        self.first_begun: float | None = None
        """When the first request's head was parsed (time.monotonic() of the site's process)."""
        self.last_ended: float | None = None
        """When the last answer was handed to the socket: from the first, the crawl's time as the site saw it."""

    def transferred(self, received: int, sent: int, *, connection: bool = False) -> None:
        """Count bytes on the wire, both ways (and a connection opened)."""
        with self._lock:
            self.bytes_received += received
            self.bytes_sent += sent
            self.connections += connection

    def begin(self, request: Request) -> int:
        """Count a request in; returns its sequence number (pass it to `end`)."""
        host = request.host
        with self._lock:
            self._seq += 1
            self.total += 1
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
            now = self.in_flight_by_host.get(host, 0) + 1
            self.in_flight_by_host[host] = now
            if now > self.max_in_flight_by_host.get(host, 0):
                self.max_in_flight_by_host[host] = now
            self.requests_by_path[request.path] += 1
            at = time.monotonic()
            last = self._last_start.get(host)
            if last is not None:
                gap = (at - last) * 1000
                self.min_gap_ms_by_host[host] = min(gap, self.min_gap_ms_by_host.get(host, gap))
            self._last_start[host] = at
            self._begun[self._seq] = (at, now)
            if self.first_begun is None:
                self.first_begun = at
            return self._seq

    def in_flight_of(self, host: str) -> int:
        """Requests of ``host`` in flight now (the site's load on that host)."""
        with self._lock:
            return self.in_flight_by_host.get(host, 0)

    def end(self, request: Request, seq: int, status: int) -> None:
        """Count a request out and log it."""
        h = request.headers
        with self._lock:
            at, concurrent = self._begun.pop(seq, (0.0, 0))
        row: _Row = (
            seq,
            request.method,
            request.path,
            request.target,
            request.host,
            h.get("if-none-match"),
            h.get("if-modified-since"),
            h.get("user-agent"),
            status,
            at,
            concurrent,
        )
        ended = time.monotonic()
        with self._lock:
            self.last_ended = ended
            self.in_flight -= 1
            self.in_flight_by_host[row[4]] -= 1
            # Plain tuples of atomic values: a long log costs the garbage collector nothing.
            self._log.append(row)

    def reset(self) -> None:
        """Forget counts and log; maxima restart from the requests still in flight."""
        with self._lock:
            self.total = 0
            self.max_in_flight = self.in_flight
            self.in_flight_by_host = {h: n for h, n in self.in_flight_by_host.items() if n}
            self.max_in_flight_by_host = dict(self.in_flight_by_host)
            self.requests_by_path = Counter()
            self.min_gap_ms_by_host = {}
            self._last_start = {}
            self._log.clear()
            self.bytes_received = 0
            self.bytes_sent = 0
            self.connections = 0
            self.first_begun = self.last_ended = None

    def count(self, path: str) -> int:
        """Requests seen for `path` (no query string) since the last reset."""
        with self._lock:
            return self.requests_by_path[path]

    def records(self, path: str | None = None) -> list[RequestRecord]:
        """Finished requests in arrival order, optionally only those of `path`."""
        with self._lock:
            rows = [r for r in self._log if path is None or r[2] == path]
        return [RequestRecord(*row) for row in sorted(rows)]

    def snapshot(self, with_log: bool = True) -> dict[str, Any]:
        """A JSON-serialisable copy of everything."""
        with self._lock:
            data: dict[str, Any] = {
                "total": self.total,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "in_flight_by_host": dict(self.in_flight_by_host),
                "max_in_flight_by_host": dict(self.max_in_flight_by_host),
                "requests_by_path": dict(self.requests_by_path),
                "min_gap_ms_by_host": {h: round(g, 3) for h, g in self.min_gap_ms_by_host.items()},
                "bytes_received": self.bytes_received,
                "bytes_sent": self.bytes_sent,
                "connections": self.connections,
                "first_begun": self.first_begun,
                "last_ended": self.last_ended,
            }
        if with_log:
            data["log"] = [asdict(r) for r in self.records()]
        return data

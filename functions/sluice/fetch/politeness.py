"""Per-host admission: concurrency (adaptive, under the spec's cap), spacing, pauses and the breaker.

One :class:`HostGate` per fetcher. It holds for the whole fleet because the queue gives a host's
messages to one fetcher at a time (``sluice.domain.hosts``) and the gate hands what must outlive
the batch to the next holder: :meth:`HostGate.export` at the end of a batch, :meth:`HostGate.adopt`
at the start of the next.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import TracebackType

from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.hosts import MAX_PAUSE_S, HostState, RunCounts, blocked_reason, pause_refused
from sluice.spec.models import Breaker

from .throttle import Throttle


class HostPaused(Exception):
    """The host may not be asked for ``wait_s`` more seconds (Retry-After, spacing): longer than the caller waits."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"host paused for {wait_s:.1f} s")
        self.wait_s = wait_s


class HostBlocked(Exception):
    """The breaker paused the host for the run; the text says why."""


class _Host:
    __slots__ = (
        "active",
        "blocked_by",
        "counts",
        "delay",
        "last_start",
        "lock",
        "not_before",
        "state",
        "throttle",
        "users",
        "waiters",
        "woken",
    )

    def __init__(self, throttle: Throttle) -> None:
        self.throttle = throttle
        self.waiters: deque[asyncio.Future[None]] = deque()
        """Requests waiting for room under the target, first come first served."""
        self.woken = 0
        """Waiters given a slot that have not taken it yet (their task has not run since)."""
        self.lock = asyncio.Lock()
        self.active = 0
        self.users = 0
        self.last_start = float("-inf")
        """Monotonic time of the last request start (or answer begun)."""
        self.not_before = float("-inf")
        """Monotonic time before which nothing starts (a pause, or the spacing the last holder left)."""
        self.delay = 0.0
        self.counts = RunCounts()
        self.blocked_by: str | None = None
        self.state: HostState | None = None
        """What the fleet knew of the host when this fetcher's batch began (None: not a fleet batch)."""

    def has_room(self) -> bool:
        """A request may go in now: under the target, counting the woken waiters' slots, or the host is blocked
        (the request goes in to be refused)."""
        return self.blocked_by is not None or self.active + self.woken < self.throttle.target


def _wake(state: _Host) -> None:
    """Hand each free slot of ``state`` to the next waiter in line (every waiter once the host is blocked)."""
    waiters = state.waiters
    free = len(waiters) if state.blocked_by is not None else state.throttle.target - state.active - state.woken
    while free > 0 and waiters:
        turn = waiters.popleft()
        if not turn.done():  # a cancelled waiter leaves its future behind
            turn.set_result(None)
            state.woken += 1
            free -= 1


class _Slot:
    """One request's slot of a host (:meth:`HostGate.slot`): taken on entering, given back on leaving.

    A plain class, not ``@asynccontextmanager``: every request enters one, and a generator-based manager
    costs an extra object and two generator steps a request. On an exception while entering, nothing is
    left taken."""

    __slots__ = ("_delay", "_gate", "_max_wait_s", "_state")

    def __init__(self, gate: HostGate, host: str, delay_s: float | None, max_wait_s: float | None) -> None:
        self._gate = gate
        self._delay = max(gate.min_delay_s, delay_s or 0.0)
        self._max_wait_s = max_wait_s
        self._state = gate._host(host)

    async def __aenter__(self) -> None:
        gate, state, delay = self._gate, self._state, self._delay
        state.delay = max(state.delay, delay)
        state.users += 1
        try:
            if state.waiters or not state.has_room():
                await gate._queue_for_room(state)
            state.active += 1
            try:
                if state.blocked_by is not None:
                    raise HostBlocked(state.blocked_by)
                if delay > 0 or state.not_before > time.monotonic():
                    async with state.lock:  # starts are spaced one at a time
                        await gate._wait_turn(state, delay, self._max_wait_s)
                        await gate._global.acquire()
                        state.last_start = time.monotonic()
                else:  # no spacing and no pause: nothing to serialize on the hot path
                    await gate._global.acquire()
                    state.last_start = time.monotonic()
            except BaseException:
                _release(state)
                raise
        except BaseException:
            state.users -= 1
            raise
        gate.in_flight += 1
        gate.max_in_flight = max(gate.max_in_flight, gate.in_flight)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        gate, state = self._gate, self._state
        gate.in_flight -= 1
        gate._global.release()
        _release(state)
        state.users -= 1


def _release(state: _Host) -> None:
    """A request leaves ``state``'s host: its slot goes to the next waiter in line, if any."""
    state.active -= 1
    if state.waiters:
        _wake(state)


class HostGate:
    """Admits a request when its host has room under its target, its spacing and pause have passed,
    its breaker has not tripped, and a global slot is free (taken only after the wait).

    The spacing runs from the later of a request's admission and its :meth:`touch` (answer begun),
    so local scheduling jitter can never bring two starts closer than the delay at the server.
    """

    def __init__(
        self,
        concurrency: int,
        per_domain: int,
        min_delay_s: float = 0.0,
        *,
        adaptive: bool = False,
        breaker: Breaker | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.concurrency = concurrency
        self.per_domain = per_domain
        self.min_delay_s = min_delay_s
        self.adaptive = adaptive
        self.breaker = breaker if breaker is not None else Breaker(enabled=False)
        self._refusals = frozenset(self.breaker.statuses)
        self._global = asyncio.Semaphore(concurrency)
        self._hosts: dict[str, _Host] = {}
        self._sweep_at = 1024
        self.in_flight = 0
        self.max_in_flight = 0
        self.pause_cap_s = MAX_PAUSE_S
        """The longest pause a host may ask: :data:`~sluice.domain.hosts.MAX_PAUSE_S`, or what the run has left."""
        self.clock = clock
        """The pipeline's time, which the fleet's host states are written in (epoch seconds); the gate's own
        spacing runs on ``time.monotonic()``, and :meth:`adopt` and :meth:`export` translate between the two."""

    # -- admission -----------------------------------------------------------------------------

    def slot(self, host: str, delay_s: float | None = None, *, max_wait_s: float | None = None) -> _Slot:
        """Hold one request slot of ``host`` (``async with``); ``delay_s`` raises the spacing (Crawl-delay).

        Raises :class:`HostBlocked` once the breaker tripped, :class:`HostPaused` when the host
        may not be asked for longer than ``max_wait_s``.
        """
        return _Slot(self, host, delay_s, max_wait_s)

    @staticmethod
    async def _queue_for_room(state: _Host) -> None:
        """Wait in line until a leaving request hands this one a slot (all waiters go once the host is blocked).

        Only as many waiters are woken as there are free slots, so a release costs one wake-up, not one per
        waiter; a waiter cancelled after it was woken hands its slot to the next in line."""
        loop = asyncio.get_running_loop()
        while True:
            turn: asyncio.Future[None] = loop.create_future()
            state.waiters.append(turn)
            if state.has_room():  # room already (it cannot wait for a release that may not come)
                _wake(state)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():  # woken, then cancelled before it ran
                    state.woken -= 1
                    _wake(state)
                elif turn in state.waiters:
                    state.waiters.remove(turn)
                raise
            state.woken -= 1
            if state.has_room():  # else the target fell meanwhile: back in line
                return

    async def _wait_turn(self, state: _Host, delay: float, max_wait_s: float | None) -> None:
        # a touch or a pause may move the start on while we sleep, once per request in flight at most
        for _ in range(self.per_domain + 2):
            wait = max(state.last_start + delay, state.not_before) - time.monotonic()
            if wait <= 0:
                break
            if max_wait_s is not None and wait > max_wait_s:
                raise HostPaused(wait)
            await asyncio.sleep(wait)
        if state.blocked_by is not None:
            raise HostBlocked(state.blocked_by)

    def touch(self, host: str) -> None:
        """Note that the request holding a slot of ``host`` has surely reached the server (its answer began)."""
        state = self._hosts.get(host)
        if state is not None:
            state.last_start = max(state.last_start, time.monotonic())

    # -- what the host says --------------------------------------------------------------------

    def answered(
        self, host: str, status: int, latency_s: float, *, retry_after_s: float | None = None, lag_s: float = 0.0
    ) -> None:
        """Fold one answer in: the throttle's latency (less ``lag_s``, our loop's) and status signals,
        the breaker's count, a pause."""
        # No waiter needs waking when the target rises: the request that answered releases its slot next.
        state = self._host(host)
        state.throttle.on_answer(latency_s * 1000, status, lag_s * 1000)
        if retry_after_s is not None and retry_after_s > self.pause_cap_s:
            self._block(state, pause_refused(host, retry_after_s, self.pause_cap_s))
        elif retry_after_s is not None and retry_after_s > 0:
            self.pause(host, retry_after_s)
        # A 429 that says when to come back is throttling, and obeyed; any other refusal counts.
        self._count(host, state, refused=status in self._refusals and not (status == 429 and retry_after_s))

    def latency_floor_s(self, host: str) -> float:
        """The lowest latency ``host`` has shown this fetcher (0 if none yet): no answer comes sooner."""
        state = self._hosts.get(host)
        floor = state.throttle.floor_ms if state is not None else None
        return floor / 1000 if floor is not None else 0.0

    def refused(self, host: str, why: str) -> None:
        """A page that is a refusal by its content (a block marker): counted like a refusing status."""
        state = self._host(host)
        self._count(host, state, refused=True, why=why)

    def reprieve(self, host: str) -> None:
        """Lift the breaker's pause and start its count afresh: the host is asked by another route (a proxy tier)."""
        state = self._host(host)
        state.blocked_by = None
        state.counts = RunCounts()

    def pause(self, host: str, seconds: float) -> None:
        """No request to ``host`` starts for ``seconds`` (Retry-After): every request of this fetcher waits."""
        state = self._host(host)
        state.not_before = max(state.not_before, time.monotonic() + seconds)

    def _block(self, state: _Host, reason: str) -> None:
        """The host is blocked for the run: its counts say why, so the next holder of the host knows it too."""
        if state.blocked_by is None:
            state.counts = replace(state.counts, tripped=reason)
            state.blocked_by = reason  # waiters see it when the answering request releases its slot

    def _count(self, host: str, state: _Host, *, refused: bool, why: str | None = None) -> None:
        rules = self.breaker
        if not rules.enabled or state.blocked_by is not None:
            return
        if not (refused or state.counts.requests):
            return  # counting starts at the host's first refusal in the run
        state.counts = state.counts.add(1, int(refused))
        counts = state.counts
        if counts.requests >= rules.min_answers and counts.share > rules.max_blocked_share:
            kind = why or "refusals (" + "/".join(str(s) for s in rules.statuses) + ")"
            reason = blocked_reason(
                host, f"{kind} on {counts.blocked} of {counts.requests} answers ({counts.share:.0%})"
            )
            state.counts = replace(counts, tripped=reason)
            state.blocked_by = reason  # waiters see it when the answering request releases its slot

    # -- the fleet's memory --------------------------------------------------------------------

    def adopt(self, run_id: str, states: Mapping[str, HostState]) -> None:
        """Take up where each host's last holder left it: its spacing, pause, target and this run's counts
        (a host the fleet knows nothing of comes as a fresh ``HostState(host)``)."""
        now = self.clock()
        offset = now - time.monotonic()
        for host, known in states.items():
            state = self._host(host)
            state.state = known
            counts = known.counts(run_id)
            state.counts = counts
            # Tripped by the breaker, or by a pause longer than the crawler waits (with the breaker off too).
            state.blocked_by = counts.tripped
            if known.paused_until - now > self.pause_cap_s:  # saved so by an older fetcher, or a run with more time
                self._block(state, pause_refused(host, known.paused_until - now, self.pause_cap_s))
            else:
                state.not_before = max(state.not_before, known.paused_until - offset)
            state.not_before = max(state.not_before, min(known.next_start, now + self.pause_cap_s) - offset)
            if known.target is not None and self.adaptive:
                state.throttle = Throttle(self.per_domain, True, known.target, known.floor_ms)

    def export(self, run_id: str, hosts: Iterable[str]) -> list[HostState]:
        """The states the next holder of these hosts needs, where they differ from what was read."""
        now = self.clock()
        offset = now - time.monotonic()
        out = []
        for host in hosts:
            state = self._hosts.get(host)
            if state is None or state.state is None:
                continue
            known = state.state
            started = state.last_start > float("-inf")
            next_start = state.last_start + state.delay + offset if state.delay > 0 and started else known.next_start
            paused = state.not_before + offset if state.not_before > time.monotonic() else 0.0
            fresh = replace(
                known,
                next_start=round(next_start, 3),
                paused_until=round(paused, 3),
                target=state.throttle.below_cap,
                floor_ms=state.throttle.floor_ms if state.throttle.below_cap is not None else None,
            )
            if state.counts != RunCounts() or run_id in known.runs:
                fresh = fresh.with_counts(run_id, state.counts)
            if not (fresh.worth_keeping(now) or known.version):
                continue  # nothing a fresh start would not know: no write
            if fresh != known:
                out.append(fresh)
        return out

    def known(self, host: str) -> HostState | None:
        """What the fleet knew of ``host`` when this fetcher's batch of it began."""
        state = self._hosts.get(host)
        return None if state is None else state.state

    def _host(self, host: str) -> _Host:
        state = self._hosts.get(host)
        if state is None:
            if len(self._hosts) >= self._sweep_at:
                self._sweep()
            state = self._hosts[host] = _Host(Throttle(self.per_domain, self.adaptive))
        return state

    def _sweep(self) -> None:
        """Forget idle hosts whose spacing has run out (amortised: the threshold doubles)."""
        now = time.monotonic()
        horizon = max(self.min_delay_s, 300.0)
        for key in [
            k for k, d in self._hosts.items() if d.users == 0 and now - d.last_start > horizon and now > d.not_before
        ]:
            del self._hosts[key]
        self._sweep_at = max(1024, 2 * len(self._hosts))

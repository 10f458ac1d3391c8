"""A batch's writes while its fetching goes on: one early chunk, written in a thread, then the rest.

Fetching a batch then writing it leaves the batch's hosts idle while it writes: one host's batches
follow one another (the queue gives a host to one fetcher at a time), so on a single host the write
is time nobody fetches. :class:`ChunkedWrites` starts writing the pages already visited once half of
the batch's URLs are done, in a thread, while the other half is still fetched; when the batch's
fetching ends only the second chunk is left to write.

Each chunk is written exactly as a whole batch is (``write``: archive, part, claims, records table,
results, in that order; see :mod:`sluice.pipeline.visit`), so a crash between the chunks leaves the
first chunk's pages counted and the second's not: the batch's messages come back (they are deleted
only after :meth:`ChunkedWrites.finish`), and the redelivery skips the pages the first chunk counted.
Writes never overlap one another: at most one chunk is in a thread at a time.

At most two chunks a batch, so at most one more part object and one more progress report than a
batch written whole. That second PUT is about 6% of a demo run's cost on AWS (``make cost``), for
about 3% of an invocation's time, so the stack leaves it off (``Tuning.early_write_urls`` 0) and the
local runner, whose parts are files, turns it on. Each chunk reports its own progress: a
worker dying between the chunks must not leave the first chunk's pages out of the drain trigger's sum.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class ChunkedWrites(Generic[T, R]):
    """Collects a batch's visits as they end; writes the first ``early`` of them while the rest are fetched.

    ``write`` is called with a list of visits, in a thread, never twice at once; ``early`` 0 writes the
    whole batch at :meth:`finish` (as before: e.g. a batch too small to be worth two parts).
    """

    def __init__(self, write: Callable[[list[T]], R], early: int) -> None:
        self._write = write
        self._early = early
        self._pending: list[T] = []
        self._running: asyncio.Task[R] | None = None
        self.chunks = 0

    def add(self, visit: T) -> None:
        """A visit that ended (called on the event loop); starts the early chunk once enough have."""
        self._pending.append(visit)
        if self._early and self._running is None and self.chunks == 0 and len(self._pending) >= self._early:
            chunk, self._pending = self._pending, []
            self.chunks += 1
            self._running = asyncio.ensure_future(asyncio.to_thread(self._write, chunk))

    async def finish(self) -> list[R]:
        """Wait for the early chunk, then write what is left; the chunks' answers in order.

        An early chunk that failed raises here, after the batch's fetching ended (the batch fails as a
        whole batch whose write failed does: its messages come back, and its counted pages are skipped)."""
        answers: list[R] = []
        if self._running is not None:
            answers.append(await self._running)
            self._running = None
        if self._pending or not answers:
            chunk, self._pending = self._pending, []
            self.chunks += 1
            answers.append(await asyncio.to_thread(self._write, chunk))
        return answers

    async def settle(self) -> None:
        """Wait for an early chunk still being written, whatever it ends in (a batch that fails on another
        step must not leave a write running in a thread while its messages go back to the queue)."""
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)
            self._running = None

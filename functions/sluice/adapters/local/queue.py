"""The frontier queue in SQLite, with SQS FIFO's semantics where a run depends on them.

Message groups (one host each) handed to one consumer at a time: a group with a message in
flight (received, not deleted, still invisible) gives nothing to anyone else, and a receive fills
its batch from the group of the oldest waiting message first, as SQS does. Visibility timeouts,
receive counts, receipt handles that change on every receive (a stale one deletes nothing), and
a dead-letter table a message moves to when a receive finds it already received
``max_receive_count`` times, as SQS's redrive policy does. Unlike SQS it can receive
one run's messages only: a state folder may hold another crawl's interrupted run, left for its
own resume.

SQS FIFO's two sizes moto does not check can be played too, scaled down (``head_window``,
``in_flight_quota``): a receive finds groups only among the first ``head_window`` messages of the
queue (SQS scans the first 120,000), and gives nothing while ``in_flight_quota`` messages are in
flight (SQS's 120,000; it returns no error, only no messages).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sluice.adapters.local.errors import local_errors
from sluice.adapters.local.store import Database
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.messages import QueuedMessage, UrlTask, pack


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message the queue gave up on after ``max_receive_count`` receives."""

    message_id: str
    run_id: str
    body: str
    receives: int


@dataclass(frozen=True, slots=True)
class QueueDepth:
    visible: int
    in_flight: int
    dead: int


@dataclass(frozen=True, slots=True)
class GroupShare:
    """One worker process's part of a run's groups, where several processes receive from one queue.

    The groups are spread over the run's ``workers`` as evenly as they go (worker ``i`` lives in process
    ``i % processes``: as many workers a process as the runner's split gives it), so no process holds more
    hosts than its workers' part while another's workers idle: on a broad crawl one receive would otherwise
    take a batch's worth of hosts (16 of 20) into one process and leave the other process 4.
    """

    index: int
    processes: int
    workers: int

    def of(self, groups: int) -> int:
        """How many of ``groups`` this process may hold at once: its workers' parts (the parts of all the
        processes add up to ``groups``), and at least one (so the processes take turns at a single host)."""
        base, extra = divmod(groups, self.workers)
        mine = sum(base + (1 if i < extra else 0) for i in range(self.index, self.workers, self.processes))
        return max(1, mine)


@local_errors
class SqliteQueue:
    """:class:`sluice.ports.WorkQueue` on SQLite, plus what the local runner plays the event source with."""

    def __init__(
        self,
        db: Database,
        *,
        urls_per_message: int = 10,
        max_receive_count: int = 5,
        visibility_s: float = 900.0,
        head_window: int | None = None,
        in_flight_quota: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._db = db
        self._clock = clock
        """The pipeline's time, which visibility and delays count in (SQS counts in its own; moving this clock
        on makes hidden messages visible here, where SQS would still hide them)."""
        self.head_window = head_window
        self.in_flight_quota = in_flight_quota
        self.urls_per_message = urls_per_message
        self.max_receive_count = max_receive_count
        self.visibility_s = visibility_s
        """What a message received by a fetcher's :meth:`receive_more` stays hidden for (as the runner's own)."""
        self.whole_groups = False
        """What :meth:`receive` does when not told (the local runner sets it; SQS always cuts a group)."""
        self.share: GroupShare | None = None
        """This process's part of the run's groups (the local runner's worker processes; None: no limit)."""
        self._mine: set[str] = set()
        """Receipts this object handed out while it has a :attr:`share` (its held groups are found from them)."""

    def send(self, crawl: str, run_id: str, tasks: Sequence[UrlTask]) -> int:
        return self.send_messages(run_id, list(pack(crawl, run_id, tasks, self.urls_per_message)))

    def send_messages(self, run_id: str, messages: Sequence[tuple[str, str]], *, delay_s: float = 0.0) -> int:
        """Enqueue ``(group, body)`` messages as they are (tests send malformed ones this way)."""
        now = self._clock()
        with self._db.transaction() as db:
            db.executemany(
                "INSERT INTO queue (run_id, grp, body, visible_at, sent_at) VALUES (?, ?, ?, ?, ?)",
                [(run_id, group, body, now + delay_s, now) for group, body in messages],
            )
        return len(messages)

    def receive(
        self, run_id: str | None, limit: int, visibility_s: float, *, whole_groups: bool | None = None
    ) -> list[QueuedMessage]:
        """Up to ``limit`` visible messages (of one run, or of any), hidden for ``visibility_s``.

        Messages already received ``max_receive_count`` times move to the dead letters instead.
        ``whole_groups`` (the local runner's, not SQS's; by default :attr:`whole_groups`): after the first
        group, a group whose visible messages do not all fit is left for the next receive, not cut (the
        rest of a cut group would wait, held, for the whole batch to end, and then be fetched alone).
        """
        whole = self.whole_groups if whole_groups is None else whole_groups
        now = self._clock()
        over = (run_id, run_id, now, self.max_receive_count)
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO dead_letters (id, run_id, body, receives, moved_at, grp) "
                "SELECT id, run_id, body, receives, ?, grp FROM queue "
                "WHERE (? IS NULL OR run_id = ?) AND visible_at <= ? AND receives >= ?",
                (now, *over),
            )
            db.execute("DELETE FROM queue WHERE (? IS NULL OR run_id = ?) AND visible_at <= ? AND receives >= ?", over)
            room, last = self._room(db, run_id, now, limit), self._window_end(db, run_id)
            groups = None if self.share is None else self._groups_left(db, run_id, now, self.share)
            rows = self._fifo_pick(db, run_id, now, room, last, whole_groups=whole, groups=groups)
            received = []
            for (message_id,) in rows:
                receipt = uuid.uuid4().hex
                body, receives = db.execute(
                    "UPDATE queue SET receives = receives + 1, visible_at = ?, receipt = ? WHERE id = ? "
                    "RETURNING body, receives",
                    (now + visibility_s, receipt, message_id),
                ).fetchone()
                received.append(QueuedMessage(str(message_id), receipt, body, receives))
            if self.share is not None:
                self._mine.update(r.receipt_handle for r in received)
        return received

    def _groups_left(self, db: sqlite3.Connection, run_id: str | None, now: float, share: GroupShare) -> int:
        """How many more groups this process may take now: its part of the run's groups (those with a message
        in the queue, held or not) less the groups it holds (its receipts still in flight)."""
        (groups,) = db.execute(
            "SELECT COUNT(DISTINCT grp) FROM queue WHERE (? IS NULL OR run_id = ?)", (run_id, run_id)
        ).fetchone()
        rows = db.execute(
            "SELECT receipt, grp FROM queue WHERE receipt IN (SELECT value FROM json_each(?)) AND visible_at > ?",
            (json.dumps(sorted(self._mine)), now),
        ).fetchall()
        self._mine = {receipt for receipt, _ in rows}  # deleted, returned and visible again: no longer held here
        return max(0, share.of(int(groups)) - len({grp for _, grp in rows}))

    def _room(self, db: sqlite3.Connection, run_id: str | None, now: float, limit: int) -> int:
        """``limit``, or less when the in-flight quota is near (none at all when it is reached)."""
        if self.in_flight_quota is None:
            return limit
        (in_flight,) = db.execute(
            "SELECT COUNT(*) FROM queue WHERE (? IS NULL OR run_id = ?) AND receipt IS NOT NULL AND visible_at > ?",
            (run_id, run_id, now),
        ).fetchone()
        return max(0, min(limit, self.in_flight_quota - int(in_flight)))

    def _window_end(self, db: sqlite3.Connection, run_id: str | None) -> int | None:
        """The id of the last message in the head window (None: the whole queue is looked at)."""
        if self.head_window is None:
            return None
        row = db.execute(
            "SELECT id FROM queue WHERE (? IS NULL OR run_id = ?) ORDER BY id LIMIT 1 OFFSET ?",
            (run_id, run_id, self.head_window - 1),
        ).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _fifo_pick(
        db: sqlite3.Connection,
        run_id: str | None,
        now: float,
        limit: int,
        last: int | None = None,
        *,
        whole_groups: bool = False,
        groups: int | None = None,
    ) -> list[tuple[int]]:
        """Ids of up to ``limit`` visible messages of groups nobody holds: the oldest's group first, among the
        messages up to id ``last`` (the head window) when it is given; with ``whole_groups``, the groups after
        the first only when all their messages fit; of at most ``groups`` groups when it is given."""
        if limit <= 0 or groups == 0:
            return []
        window = -1 if last is None else last
        held = {
            grp
            for (grp,) in db.execute(
                "SELECT DISTINCT grp FROM queue WHERE (? IS NULL OR run_id = ?) AND receipt IS NOT NULL "
                "AND visible_at > ?",
                (run_id, run_id, now),
            )
        }
        picked: list[tuple[int]] = []
        taken = 0
        skipped = ",".join("?" * len(held))
        for _ in range(limit):  # a group per round, at most ``limit`` rounds
            free = f"AND grp NOT IN ({skipped})" if held else ""
            head = db.execute(
                f"SELECT grp FROM queue WHERE (? IS NULL OR run_id = ?) AND visible_at <= ? {free} "  # noqa: S608 - placeholders only
                "AND (? < 0 OR id <= ?) ORDER BY id LIMIT 1",
                (run_id, run_id, now, *held, window, window),
            ).fetchone()
            if head is None:
                break
            group = head[0]
            room = limit - len(picked)
            ids = db.execute(
                "SELECT id FROM queue WHERE (? IS NULL OR run_id = ?) AND grp = ? AND visible_at <= ? "
                "AND (? < 0 OR id <= ?) ORDER BY id LIMIT ?",
                (run_id, run_id, group, now, window, window, room + 1 if whole_groups else room),
            ).fetchall()
            if not whole_groups or not picked or len(ids) <= room:
                picked += ids[:room]
                taken += 1
            held.add(group)  # taken, or passed over for this receive
            skipped = ",".join("?" * len(held))
            if len(picked) >= limit or taken == groups:
                break
        return picked

    def receive_more(self, run_id: str, limit: int) -> list[QueuedMessage]:
        return self.receive(run_id, limit, self.visibility_s)

    def delete(self, receipts: Sequence[str]) -> None:
        with self._db.transaction() as db:
            db.executemany("DELETE FROM queue WHERE receipt = ?", [(r,) for r in receipts])

    def return_after(self, receipt: str, delay_s: int) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE queue SET visible_at = ? WHERE receipt = ?", (self._clock() + delay_s, receipt))

    def release_in_flight(self, run_id: str) -> int:
        """Make a run's received, undeleted messages visible now: the process that held them is gone (a resume)."""
        now = self._clock()
        with self._db.transaction() as db:
            cursor = db.execute(
                "UPDATE queue SET visible_at = ? WHERE run_id = ? AND receipt IS NOT NULL AND visible_at > ?",
                (now, run_id, now),
            )
            return cursor.rowcount

    def depth(self, run_id: str | None) -> QueueDepth:
        """Messages (of one run, or all) visible, in flight, and dead-lettered."""
        now = self._clock()
        with self._db.reading() as db:
            visible, in_flight = db.execute(
                "SELECT COUNT(*) FILTER (WHERE visible_at <= ?), COUNT(*) FILTER (WHERE visible_at > ?) "
                "FROM queue WHERE (? IS NULL OR run_id = ?)",
                (now, now, run_id, run_id),
            ).fetchone()
            (dead,) = db.execute(
                "SELECT COUNT(*) FROM dead_letters WHERE (? IS NULL OR run_id = ?)", (run_id, run_id)
            ).fetchone()
        return QueueDepth(visible, in_flight, dead)

    def dead_letters(self, run_id: str | None, limit: int = 100) -> list[tuple[str, str]]:
        """(message id, body) of dead letters (of one run, or all), oldest first."""
        with self._db.reading() as db:
            rows = db.execute(
                "SELECT id, body FROM dead_letters WHERE (? IS NULL OR run_id = ?) ORDER BY id LIMIT ?",
                (run_id, run_id, limit),
            ).fetchall()
        return [(str(i), b) for i, b in rows]

    def dead_letter_list(self, limit: int = 10_000) -> list[DeadLetter]:
        """Every dead letter (up to ``limit``), oldest first."""
        with self._db.reading() as db:
            rows = db.execute(
                "SELECT id, run_id, body, receives FROM dead_letters ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
        return [DeadLetter(str(i), r, b, n) for i, r, b, n in rows]

    def redrive(self, move: Sequence[str], purge: Sequence[str] = ()) -> tuple[int, int]:
        """Dead letters ``move`` back to the queue (visible now, never received, in their group) and
        ``purge`` deleted, in one transaction; ``(moved, purged)``, counting only those still there.

        A letter another redrive took meanwhile is neither moved nor counted twice.
        """
        now = self._clock()
        with self._db.transaction() as db:
            moved = 0
            for message_id in move:
                row = db.execute("DELETE FROM dead_letters WHERE id = ? RETURNING run_id, grp, body", (message_id,))
                found = row.fetchone()
                if found is None:
                    continue
                db.execute(
                    "INSERT INTO queue (run_id, grp, body, visible_at, sent_at) VALUES (?, ?, ?, ?, ?)",
                    (*found, now, now),
                )
                moved += 1
            purged = sum(
                db.execute("DELETE FROM dead_letters WHERE id = ?", (message_id,)).rowcount for message_id in purge
            )
        return moved, purged

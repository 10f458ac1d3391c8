"""The frontier as SQS FIFO runs it, for the model: message groups, one batch in flight a group, the head window.

A FIFO queue hands a group to one consumer at a time and looks for groups it can deliver only among
its first ``window`` messages (AWS: "FIFO queues scan the first 120,000 messages to determine
available message groups"). Messages are kept as *segments*, runs of one host's messages in send
order, so a night of ten million messages is a few hundred thousand segments; a Fenwick tree over
the segments counts the messages ahead of any group's head in O(log n).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field


class Fenwick:
    """Prefix sums over a growing array of counts (the messages each segment still holds).

    Changes wait in ``pending`` until a sum is asked for: a queue that never holds more than its
    window never needs one, and pays nothing for the tree."""

    def __init__(self, capacity: int) -> None:
        self.size = max(1, capacity)
        self.tree = [0] * (self.size + 1)
        self.used = 0
        self.pending: list[tuple[int, int]] = []

    def append(self, count: int) -> int:
        """A new last entry holding ``count``; its index."""
        if self.used >= self.size:
            raise OverflowError(f"the model's queue outgrew its {self.size} segments")
        index = self.used
        self.used += 1
        self.pending.append((index, count))
        return index

    def add(self, index: int, delta: int) -> None:
        self.pending.append((index, delta))

    def _apply(self) -> None:
        tree, size = self.tree, self.size
        for index, delta in self.pending:
            i = index + 1
            while i <= size:
                tree[i] += delta
                i += i & -i
        self.pending.clear()

    def before(self, index: int) -> int:
        """The sum of entries ``0 .. index - 1``."""
        if self.pending:
            self._apply()
        total, i = 0, index
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total


@dataclass
class Group:
    """One host's message group: its queued messages (by segment), whether a consumer holds it."""

    host: int
    queued: deque[list[int]] = field(default_factory=deque)
    """``[segment, messages]`` in send order, not yet received."""
    waiting: int = 0
    held: bool = False


Taken = list[tuple[int, int]]
"""``(segment, messages)`` a receive took from one group, to delete when its batch ends."""


class FifoQueue:
    """Groups, segments and the window; ``receive`` plays ReceiveMessage as a FIFO queue answers it."""

    def __init__(self, hosts: int, capacity: int, window: float) -> None:
        self.groups = [Group(h) for h in range(hosts)]
        self.segments = Fenwick(capacity)
        self.window = window
        self.free: list[tuple[int, int]] = []
        """(head segment, host) of groups nobody holds that have messages: the oldest head first."""
        self.last_host = -1
        self.last_segment = -1
        self.in_flight = 0
        self.stored = 0
        """Messages in the queue: waiting and in flight."""
        self.quota_held = 0
        """Receives the in-flight quota cut short."""
        self.window_blocked = False
        """The last receive stopped at a free group past the window (it had messages, SQS could not see them)."""

    def send(self, host: int, messages: int) -> None:
        """``messages`` of ``host`` at the tail (joined to the last segment when it is the same host's)."""
        if messages <= 0:
            return
        group = self.groups[host]
        if host == self.last_host and group.queued and group.queued[-1][0] == self.last_segment:
            self.segments.add(self.last_segment, messages)
            group.queued[-1][1] += messages
        else:
            self.last_segment = self.segments.append(messages)
            self.last_host = host
            group.queued.append([self.last_segment, messages])
            if not group.held and group.waiting == 0:
                heapq.heappush(self.free, (self.last_segment, host))
        group.waiting += messages
        self.stored += messages

    def visible_head(self, group: Group) -> bool:
        """Whether the group's next message lies within the first ``window`` messages of the queue."""
        if not group.queued:
            return False
        return self.stored <= self.window or self.segments.before(group.queued[0][0]) < self.window

    def receive(self, limit: int, in_flight_quota: float) -> list[tuple[int, Taken]]:
        """Up to ``limit`` messages: as many of the oldest deliverable group as it has, then the next group's.

        Returns ``(host, taken)`` per group; each group returned is held until :meth:`delete` frees it."""
        picked: list[tuple[int, Taken]] = []
        self.window_blocked = False
        left = min(limit, int(in_flight_quota) - self.in_flight)
        if left < limit and self.free:
            self.quota_held += 1
        while left > 0 and self.free:
            head, host = self.free[0]
            group = self.groups[host]
            if group.held or not group.queued or group.queued[0][0] != head:
                heapq.heappop(self.free)  # stale: held since, or its head moved
                continue
            if self.stored > self.window and self.segments.before(head) >= self.window:
                self.window_blocked = True
                break  # the oldest free group is past the window: so is every later one
            heapq.heappop(self.free)
            taken: Taken = []
            while left > 0 and group.queued:
                segment = group.queued[0]
                n = min(left, segment[1])
                taken.append((segment[0], n))
                segment[1] -= n
                left -= n
                if segment[1] == 0:
                    group.queued.popleft()
            count = sum(n for _, n in taken)
            group.waiting -= count
            group.held = True
            self.in_flight += count
            picked.append((host, taken))
        return picked

    def delete(self, host: int, taken: Taken) -> None:
        """The batch holding ``taken`` ended: its messages leave the queue and the group is free again."""
        group = self.groups[host]
        for segment, n in taken:
            self.segments.add(segment, -n)
            self.in_flight -= n
            self.stored -= n
        group.held = False
        if group.queued:
            heapq.heappush(self.free, (group.queued[0][0], host))

    def hosts_in_window(self) -> int:
        """How many groups have a message within the window now (held or not)."""
        return sum(1 for g in self.groups if self.visible_head(g))

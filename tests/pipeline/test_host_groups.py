"""A host is one queue group, held by one consumer at a time; its state has one writer (both adapter sets)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from sluice.adapters.local.queue import SqliteQueue
from sluice.adapters.local.store import Database
from sluice.domain.hosts import HostState, RunCounts, host_key
from sluice.messages import UrlTask, pack

RUN = "20261201T000000Z-abcdef"


def test_messages_hold_one_host_each_and_carry_its_group() -> None:
    tasks = [UrlTask(url=f"http://{h}.example/{n}") for n in range(3) for h in ("a", "b")]
    packed = list(pack("c", RUN, tasks, urls_per_message=2))
    assert [g for g, _ in packed] == ["a.example:80", "a.example:80", "b.example:80", "b.example:80"]
    for group, body in packed:
        assert {host_key(t["url"]) for t in json.loads(body)["tasks"]} == {group}


def test_local_queue_gives_a_group_to_one_consumer_at_a_time(tmp_path: Path) -> None:
    queue = SqliteQueue(Database(tmp_path))
    queue.send_messages(RUN, [("a", "a1"), ("b", "b1"), ("a", "a2"), ("a", "a3"), ("c", "c1")])
    first = queue.receive(RUN, 2, 60)
    assert [m.body for m in first] == ["a1", "a2"]  # the oldest message's group first, as many as fit
    second = queue.receive(RUN, 10, 60)
    assert [m.body for m in second] == ["b1", "c1"]  # a3 waits: its group is held
    assert queue.receive(RUN, 10, 60) == []
    queue.delete([first[0].receipt])
    assert queue.receive(RUN, 10, 60) == []  # a2 is still in flight: the group is still held
    queue.return_after(first[1].receipt, 0)  # a2 visible again (a failed message): the group is free
    assert [m.body for m in queue.receive(RUN, 10, 60)] == ["a2", "a3"]


def test_host_state_has_one_writer_a_stale_write_is_dropped(pipeline: Any) -> None:
    book = pipeline.services.hosts
    assert book.load(["a:80"]) == {}
    state = HostState("a:80", paused_until=2e9).with_counts(RUN, RunCounts(3, 2))
    assert book.save([state]) == 1
    stored = book.load(["a:80", "b:80"])
    assert list(stored) == ["a:80"]
    assert stored["a:80"].version == 1
    assert stored["a:80"].counts(RUN) == RunCounts(3, 2)
    assert book.save([dataclasses.replace(state, target=2)]) == 0  # read at version 0: someone wrote since
    assert book.save([dataclasses.replace(stored["a:80"], target=2)]) == 1
    assert book.load(["a:80"])["a:80"].target == 2

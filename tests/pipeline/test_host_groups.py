"""A host is one queue group, held by one consumer at a time; its state has one writer (both adapter sets)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from sluice.adapters.local.queue import GroupShare, SqliteQueue
from sluice.adapters.local.store import Database
from sluice.domain.hosts import HostState, RunCounts, host_key
from sluice.messages import QueuedMessage, UrlTask, pack
from sluice_tools.demosite import RunningDemoSite, running_demo_site

from .conftest import Logs, Pipeline, SpecData

RUN = "20261201T000000Z-abcdef"
HOST = "127.0.0.1"


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
    queue.delete([first[0].receipt_handle])
    assert queue.receive(RUN, 10, 60) == []  # a2 is still in flight: the group is still held
    queue.return_after(first[1].receipt_handle, 0)  # a2 visible again (a failed message): the group is free
    assert [m.body for m in queue.receive(RUN, 10, 60)] == ["a2", "a3"]


def test_a_local_runners_receive_takes_whole_groups_after_the_first(tmp_path: Path) -> None:
    queue = SqliteQueue(Database(tmp_path))
    sent = [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("b", "b2"), ("c", "c1"), ("c", "c2"), ("c", "c3")]
    queue.send_messages(RUN, [*sent, ("d", "d1")])
    first = queue.receive(RUN, 2, 60, whole_groups=True)
    assert [m.body for m in first] == ["a1", "a2"]  # the first group is cut at the limit, as SQS cuts it
    second = queue.receive(RUN, 4, 60, whole_groups=True)
    assert [m.body for m in second] == ["b1", "b2", "d1"]  # c's three would not fit: c is left whole, d fits
    assert [m.body for m in queue.receive(RUN, 10, 60, whole_groups=True)] == ["c1", "c2", "c3"]


def test_host_state_has_one_writer_a_stale_write_is_dropped(pipeline: Pipeline) -> None:
    book = pipeline.hosts
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


@contextmanager
def _sites(n: int, **config: Any) -> Iterator[list[RunningDemoSite]]:
    """``n`` demo sites on 127.0.0.1, each its own host (host:port), each its own queue group."""
    with ExitStack() as stack:
        yield [stack.enter_context(running_demo_site(books=100, **config)) for _ in range(n)]


def _pages(site: RunningDemoSite) -> int:
    return sum(r.path != "/robots.txt" for r in site.stats.records())


def _broad(pipeline: Pipeline, books_spec: SpecData, sites: list[RunningDemoSite], per_host: int) -> None:
    urls = [f"{s.base_url}/catalogue/page-1.html?copy={i}" for s in sites for i in range(per_host)]
    data = books_spec("broad", sites[0].base_url, pages=0, urls=urls, max_depth=0)
    data["politeness"] |= {"concurrency": 8, "concurrency_per_domain": 2}  # four hosts' worth
    pipeline.spec(data)


@pytest.mark.parametrize("pack_receives", [8, 0], ids=["packed", "unpacked"])
def test_a_batch_of_one_host_is_packed_with_other_hosts(
    pipeline: Pipeline, books_spec: SpecData, logs: Logs, pack_receives: int
) -> None:
    """One message of one host delivered: the fetcher receives the other hosts' messages itself, up to the
    concurrency their caps allow, visits them in the same invocation, and deletes them when done."""
    pipeline.configure(pack_receives=pack_receives)
    with _sites(4, latency_ms=20) as sites:
        _broad(pipeline, books_spec, sites, per_host=6)
        pipeline.start("broad")
        delivered = pipeline.receive(1)
        assert len(delivered) == 1
        assert pipeline.deliver(delivered) == set()
        fetched = [_pages(s) for s in sites]
        if pack_receives:
            assert fetched == [6, 6, 6, 6]  # four hosts in one invocation...
            assert pipeline.in_queue() == 0  # ...and what it received itself, it deleted
            assert max(s.stats.max_in_flight_by_host[HOST] for s in sites) <= 2  # each host under its cap
            assert [e["hosts"] for e in logs.named("batch packed")] == [4]
        else:
            assert sorted(fetched) == [0, 0, 0, 6]
            assert pipeline.in_queue() == 3


def test_a_packed_message_that_fails_comes_back_and_is_not_reported(pipeline: Pipeline, books_spec: SpecData) -> None:
    """A packed host answering 503 to every try: its message is returned with a visibility (not deleted),
    and the invocation's answer names none of the event source's own messages."""
    pipeline.configure(pack_receives=8)
    with _sites(1) as good, _sites(1, fail_503_fraction=1.0, faulty_attempts=None) as bad:
        _broad(pipeline, books_spec, [*good, *bad], per_host=3)
        pipeline.start("broad")
        delivered = pipeline.receive(1)
        assert [json.loads(m.body)["tasks"][0]["url"].startswith(good[0].base_url) for m in delivered] == [True]
        assert pipeline.deliver(delivered) == set()
        assert _pages(good[0]) == 3
        assert _pages(bad[0]) >= 3  # visited in the same invocation, every try refused
        assert pipeline.in_queue() == 1  # the failed packed message waits for its retry
        assert len(pipeline.visibility_changes) == 1


def test_a_process_share_of_groups_is_its_workers_part_and_the_parts_cover_every_group() -> None:
    for workers, processes in ((8, 2), (5, 2), (6, 3), (2, 2)):
        shares = [GroupShare(i, processes, workers) for i in range(processes)]
        for groups in range(50):
            parts = [s.of(groups) for s in shares]
            assert sum(parts) >= groups  # every group has a process that may hold it: none waits for ever
            if workers % processes == 0:
                assert max(parts) - min(parts) <= 1  # as many workers each: hosts within one of each other
            assert min(parts) >= 1  # a single host is taken in turns by every process
    assert [GroupShare(i, 2, 8).of(20) for i in range(2)] == [10, 10]


def test_worker_processes_receiving_from_one_queue_split_a_broad_crawls_hosts_evenly(tmp_path: Path) -> None:
    # 20 hosts of 6 messages each, 8 workers in 2 processes, a receive of up to 100 messages (the local runner's).
    first, second = SqliteQueue(Database(tmp_path)), SqliteQueue(Database(tmp_path))
    for n, queue in enumerate((first, second)):
        queue.whole_groups = True
        queue.share = GroupShare(n, 2, 8)
    first.send_messages(RUN, [(f"h{h}", f"h{h}-{m}") for m in range(6) for h in range(20)])

    def hosts(received: list[QueuedMessage]) -> set[str]:
        return {m.body.split("-")[0] for m in received}

    taken = first.receive(RUN, 100, 60)
    assert len(hosts(taken)) == 10  # not 16, a batch's worth, leaving the other process 4
    assert first.receive(RUN, 100, 60) == []  # its part is held: its other workers leave the rest alone
    other = second.receive(RUN, 100, 60)
    assert len(hosts(other)) == 10
    assert hosts(taken).isdisjoint(hosts(other))
    done = [m.receipt_handle for m in taken if m.body.startswith(sorted(hosts(taken))[0] + "-")]
    first.delete(done)  # one host finished, this process holds 9 of its part of 10
    first.send_messages(RUN, [("new", "new-0")])  # a host its links found
    assert hosts(first.receive(RUN, 100, 60)) == {"new"}
    assert second.receive(RUN, 100, 60) == []

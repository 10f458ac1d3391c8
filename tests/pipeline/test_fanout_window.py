"""A host with 100,000 URLs ahead of 50 small ones, in a queue that looks at its first 200 messages only.

SQS FIFO finds deliverable groups among the first 120,000 messages of a queue; moto and SQLite look
at all of them, so a fan-out that hides every other host behind its first one passed every test. The
local queue plays the window here, scaled down (``head_window``), and the fleet is played in rounds:
each round up to ``FLEET`` fetchers receive a batch, then each sends the backlog chunks its batch
points at (the fetcher's own :func:`~sluice.pipeline.start.backlog.send_backlog`) and deletes its batch.
No page is fetched: the test is about which hosts the queue can give, in queue order, not wall time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from sluice.domain.hosts import host_key
from sluice.domain.layout import seeds_key
from sluice.messages import CrawlMessage, parse_body
from sluice.pipeline.start.backlog import send_backlog

from .conftest import LocalHarness, PipelineOn

WINDOW = 200
"""Messages the emulated queue looks at for groups (SQS: 120,000, scaled down as the issue asks)."""
FLEET = 20
BIG, SMALL_HOSTS, SMALL = 100_000, 50, 20
ROUNDS = 20
"""Rounds played: the small hosts need 1 (2 messages each); the big host's 10,000 messages would take 1,000."""


def _spec(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "seeds": {"file": "seeds.txt"},
        "follow": {"max_pages": BIG + SMALL_HOSTS * SMALL, "max_depth": 0, "allowed_domains": ["127.0.0.1"]},
        "extract": {"fields": {"title": "h1::text"}},
    }


def _grouped_seed_file(big: int) -> bytes:
    """As people write them: the big host's URLs first, then each small host's (ports nothing listens on)."""
    lines = [f"http://127.0.0.1:9/big/{n}.html" for n in range(big)]
    lines += [f"http://127.0.0.1:{20_000 + h}/small/{n}.html" for h in range(SMALL_HOSTS) for n in range(SMALL)]
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Played:
    first_hosts: set[str]
    """The hosts the fleet's first round received: what the window held from the start."""
    small_done_round: int | None
    """The round in which the last small host's last URL was received (None: not within ROUNDS)."""
    big_received: int
    """The big host's URLs received by then (or by the last round played)."""
    queued_peak: int


def _play(pipeline: PipelineOn[LocalHarness], cap_messages: int, rounds: int = ROUNDS, big: int = BIG) -> Played:
    pipeline.configure(host_backlog_messages=cap_messages)
    queue = pipeline.harness.store.queue
    queue.head_window = WINDOW
    queue.in_flight_quota = WINDOW  # scaled down as the window is: the fleet's 20 x 10 never pass it
    pipeline.spec(_spec("skewed"))
    pipeline.services.objects.put(seeds_key("skewed", "seeds.txt"), _grouped_seed_file(big), "text/plain")
    run_id = pipeline.start("skewed")
    big_host = host_key("http://127.0.0.1:9/")
    small_left = {host_key(f"http://127.0.0.1:{20_000 + h}/"): SMALL for h in range(SMALL_HOSTS)}
    received: Counter[str] = Counter()
    first_hosts: set[str] = set()
    peak = queue.depth(run_id).visible
    for round_ in range(1, rounds + 1):
        batches = [b for b in (queue.receive(run_id, 10, 60.0) for _ in range(FLEET)) if b]
        assert batches, f"round {round_}: the queue gave nothing"
        for batch in batches:
            pointers = []
            for queued in batch:
                message = parse_body(CrawlMessage, queued.body)
                for task in message.tasks:
                    host = host_key(task.url)
                    received[host] += 1
                    if host in small_left:
                        small_left[host] -= 1
                    if task.backlog is not None:
                        pointers.append((task.backlog, False))
                    if round_ == 1:
                        first_hosts.add(host)
            send_backlog(pipeline.services, "skewed", run_id, pointers)
            queue.delete([q.receipt_handle for q in batch])
        peak = max(peak, queue.depth(run_id).visible)
        if not any(small_left.values()):
            return Played(first_hosts, round_, received[big_host], peak)
    return Played(first_hosts, None, received[big_host], peak)


def _small_hosts_first(played: Played) -> None:
    assert len(played.first_hosts) == 1 + SMALL_HOSTS, f"first window held {len(played.first_hosts)} hosts"
    assert played.small_done_round is not None, (
        f"small hosts not done after {ROUNDS} rounds; the big host had {played.big_received} URLs received"
    )
    assert played.big_received < BIG // 10  # the small hosts finished while the big one had 90 % to go


@pytest.mark.timeout(300)  # a fan-out of 101,000 seeds: seconds alone, more on a loaded machine
def test_a_big_host_first_in_the_seed_file_does_not_starve_the_small_ones(
    local_pipeline: PipelineOn[LocalHarness],
) -> None:
    played = _play(local_pipeline, cap_messages=20)
    _small_hosts_first(played)
    assert played.small_done_round is not None
    assert played.small_done_round <= 3
    # The queue never held more than hosts x cap messages (+ a wave being refilled): far under the window.
    assert played.queued_peak <= 2 * 20 + SMALL_HOSTS * 2 + 1


def test_the_old_fan_out_starves_them_on_the_same_window(local_pipeline: PipelineOn[LocalHarness]) -> None:
    """No cap (``host_backlog_messages: 0``) is the old fan-out, every seed sent at once in seed order: the window
    holds the big host alone, and the check above fails."""
    # 10,000 URLs of the big host are 1,000 messages, five windows of them: as hidden as 100,000, and quicker.
    played = _play(local_pipeline, cap_messages=0, rounds=5, big=10_000)  # 5 rounds: the new fan-out needs 1
    assert played.first_hosts == {host_key("http://127.0.0.1:9/")}
    assert played.small_done_round is None
    with pytest.raises(AssertionError, match="first window held 1 hosts"):
        _small_hosts_first(played)

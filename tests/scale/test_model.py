"""The scale model on nights small enough to work out by hand (each test writes the arithmetic out).

Every night here has no AWS call latency, no CPU and an instant fan-out unless the test says
otherwise, so a batch lasts exactly its slowest host's rounds: ceil(pages / cap) x latency.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sluice_tools.scale.inputs import Measured, Site, Stack, stack_settings
from sluice_tools.scale.model import Night, batch_rounds, lower_bound, play
from sluice_tools.scale.quotas import load_quotas

QUOTAS = load_quotas()


def figures(**changes: float | dict[str, float]) -> Measured:
    """Per-page figures of nothing at all, but those a test sets."""
    base = Measured(
        write_units=1.0,
        read_units=0.0,
        s3_puts=0.0,
        s3_gets=0.0,
        sqs_requests=0.0,
        log_bytes=0.0,
        cpu_s=0.0,
        base_rss_mb={"fetcher": 100.0, "scheduler": 100.0, "finalizer": 100.0},
        finalize_s=0.0,
        finalize_bytes=0.0,
        finalize_mb=0.0,
        site_latency_s=0.3,
        sources={},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def stack(**changes: object) -> Stack:
    """The deployed settings, with no AWS call time (an instant fan-out, no sequential calls a batch)."""
    return replace(stack_settings(), aws_call_s=0.0, sequential_calls_per_batch=0, **changes)  # type: ignore[arg-type]


def test_one_host_takes_its_urls_times_latency_over_its_cap() -> None:
    # 1,000 URLs, cap 4, 0.5 s a page, the spec's concurrency 4 (nothing to pack): 100 messages, 10 batches
    # of 100 URLs, each ceil(100 / 4) = 25 rounds of 0.5 s = 12.5 s, one after another (one group):
    # 125 s = N x L / c. The finalizer (nothing to count here) adds its cold start, the trigger nothing.
    site = Site(latency_s=0.5, concurrency=4, concurrency_per_domain=4)
    outcome = play(Night((1000,), site, stack()), QUOTAS, figures())
    assert outcome.phases["fetch_s"] == pytest.approx(125.0)
    assert outcome.bound_s == pytest.approx(125.0)
    assert outcome.bound_by.startswith("host 1")
    assert outcome.functions["fetcher"].invocations == 10
    assert outcome.functions["fetcher"].peak_concurrency == 1  # one group: one fetcher at a time
    assert outcome.limits_crossed == []


def test_min_delay_sets_a_hosts_pace_when_slower_than_its_cap() -> None:
    # cap 8 at 0.1 s allows 80 pages/s; a 1 s min delay allows 1: 100 URLs take (100 - 1) x 1 + 0.1 = 99.1 s.
    site = Site(latency_s=0.1, concurrency=8, concurrency_per_domain=8, min_delay_s=1.0)
    outcome = play(Night((100,), site, stack()), QUOTAS, figures())
    assert outcome.phases["fetch_s"] == pytest.approx(99.1)
    assert lower_bound(Night((100,), site, stack()))[0] == pytest.approx(100.0)  # 100 URLs at 1 a second


def test_many_hosts_are_paced_by_the_fleet() -> None:
    # 100 hosts of 100 URLs, cap 1, concurrency 1, 1 s a page, 5 fetchers: a batch is one host's 100 URLs,
    # 100 s; 100 batches over 5 fetchers = 20 rounds = 2,000 s. Bound: a host needs 100 s, the fleet
    # 10,000 URLs / (5 x 1 / 1 s) = 2,000 s: the fleet sets it.
    site = Site(latency_s=1.0, concurrency=1, concurrency_per_domain=1)
    night = Night((100,) * 100, site, stack(fetcher_max_concurrency=5))
    outcome = play(night, QUOTAS, figures())
    assert outcome.phases["fetch_s"] == pytest.approx(2000.0)
    assert outcome.bound_s == pytest.approx(2000.0)
    assert outcome.bound_by.startswith("fleet")
    assert outcome.functions["fetcher"].peak_concurrency == 5


def test_packing_fills_an_invocation_with_hosts_whose_urls_wait_in_message_order() -> None:
    # 4 hosts of 100 URLs, cap 2, concurrency 8 (wants 8 / 2 = 4 hosts), one fetcher: its batch takes one
    # host's 10 messages and packs the other three: one invocation of 400 URLs.
    # In message order (pipeline/visit/batch.py today) the first host's URLs take all 8 slots and only 2 run: it is
    # done at round 50, and each next host enters the slots only once the one before has fewer than 8 URLs
    # left, 47 rounds later: 50 + 3 x 47 = 191 rounds of 0.1 s = 19.1 s.
    site = Site(latency_s=0.1, concurrency=8, concurrency_per_domain=2)
    by_message = Night((100,) * 4, site, stack(fetcher_max_concurrency=1), batch_order="by-message")
    outcome = play(by_message, QUOTAS, figures())
    assert outcome.functions["fetcher"].invocations == 1
    assert outcome.phases["fetch_s"] == pytest.approx(19.1)
    # Interleaved (one URL of each host in turn), each host holds 2 slots: ceil(100 / 2) = 50 rounds, 5 s.
    interleaved = Night((100,) * 4, site, stack(fetcher_max_concurrency=1), batch_order="interleaved")
    assert play(interleaved, QUOTAS, figures()).phases["fetch_s"] == pytest.approx(5.0)
    # Without packing: one host a batch, 4 batches of 50 rounds: 20 s.
    unpacked_night = Night(
        (100,) * 4, site, stack(fetcher_max_concurrency=1, pack_receives=0), batch_order="by-message"
    )
    unpacked = play(unpacked_night, QUOTAS, figures())
    assert unpacked.functions["fetcher"].invocations == 4
    assert unpacked.phases["fetch_s"] == pytest.approx(20.0)


def test_batch_rounds_by_hand() -> None:
    # One host: ceil(n / cap). Two hosts of 10 in message order, 4 slots, cap 2: slots go to URLs 1-4, then
    # 2 more a round: the first host's 10th URL takes a slot after round 3, the second's first two after
    # round 4, so the second runs rounds 5 to 9: 9 rounds (interleaved, both run from round 1: 5).
    assert batch_rounds((100,), 32, 8, "by-message") == 13
    assert batch_rounds((10, 10), 4, 2, "by-message") == 9
    assert batch_rounds((10, 10), 4, 2, "interleaved") == 5
    assert batch_rounds((10, 10), 2, 2, "interleaved") == 10  # the slots, not the caps, bind: 20 / 2


BIG_FIRST = (100_000,) + (100,) * 50
"""One host with 100,000 URLs (10,000 messages) first in the seed file, then 50 hosts of 100 URLs (10 messages)."""


def test_the_old_fan_out_starves_small_hosts_behind_a_big_first_host() -> None:
    # Window scaled down to 200 messages. Seed order puts the big host's 10,000 messages first: a small
    # host's first message is visible only once fewer than 200 of the big host's are left, i.e. after
    # 9,801 deleted = 981 batches of 10 messages, each ceil(100 / 2) x 0.1 s = 5 s: 4,905 s.
    site = Site(latency_s=0.1, concurrency=2, concurrency_per_domain=2)
    night = Night(BIG_FIRST, site, stack(fetcher_max_concurrency=10), fan_out="seed-order", head_window=200)
    outcome = play(night, QUOTAS, figures())
    small_started = outcome.host_first_s[1:]
    assert min(small_started) == pytest.approx(4905.0)
    assert outcome.hosts_in_first_window == 1
    assert any(limit.startswith("SQS FIFO head window (200 messages)") for limit in outcome.limits_crossed)


def test_the_round_robin_fan_out_serves_every_host_from_the_start() -> None:
    # Round-robin, at most 20 messages a host: one message of each of the 51 hosts a round, so all 51 heads
    # are within the first 51 messages of the 200-message window. 10 fetchers take 10 hosts' 10 messages each
    # (100 URLs, 5 s); the 50 small hosts (all their messages in one batch) are done in at most
    # ceil(50 / 9) = 6 rounds of 5 s = 30 s, while the big host is served all along (its rounds every 5 s).
    site = Site(latency_s=0.1, concurrency=2, concurrency_per_domain=2)
    night = Night(BIG_FIRST, site, stack(fetcher_max_concurrency=10), fan_out="round-robin", head_window=200)
    outcome = play(night, QUOTAS, figures())
    assert outcome.hosts_in_first_window == 51
    assert max(outcome.host_done_s[1:]) <= 30.0 + 1e-9
    assert not any("head window" in limit for limit in outcome.limits_crossed)
    # The big host needs 1,000 batches of 5 s: 5,000 s, its lower bound. At 5 s the 41 small hosts left have
    # older heads (round 1) than its next message (round 2), so the 10 fetchers take them first, at 5, 10,
    # 15 and 20 s; it resumes at 25 s with the last one: 20 s lost, 5,020 s.
    assert outcome.bound_s == pytest.approx(5000.0)
    assert outcome.phases["fetch_s"] == pytest.approx(5020.0)


def test_the_one_finalizer_past_fifteen_minutes_is_named_and_the_shards_are_not() -> None:
    # 1,000,000 pages at 1 ms each: one invocation needs 1 s (cold start) + 1,000 s, past Lambda's 900 s.
    # Sharded: the smallest power of two from 16 with at most 50,000 pages a shard is 32 (31,250 pages,
    # 32.25 s each), 16 at a time: 2 rounds, 64.5 s, then the combine step (2 s, no call time here).
    site = Site(latency_s=0.01, concurrency=100, concurrency_per_domain=100)
    hosts = (10_000,) * 100
    measured = figures(finalize_s=0.001)
    single = play(Night(hosts, site, stack(), finalizer="single"), QUOTAS, measured)
    assert any(
        limit.startswith("finalizer: an invocation needs 1,001 s, past Lambda's 900 s")
        for limit in single.limits_crossed
    )
    sharded = play(Night(hosts, site, stack(finalizer_shard_max_concurrency=16), finalizer="sharded"), QUOTAS, measured)
    assert sharded.shards == 32
    assert sharded.phases["finalize_s"] == pytest.approx(2 * 32.25 + 2.0)
    assert sharded.functions["finalizer"].invocations == 33  # 32 shards and the combine step
    assert not any(limit.startswith("finalizer") for limit in sharded.limits_crossed)


def test_a_hot_dynamodb_partition_is_named() -> None:
    # 1,600 URLs over 16 hosts, cap 100, one batch each (100 URLs in one 0.5 s round), 16 fetchers: all
    # 1,600 pages write at 0.5 s, in one second. At 20 write units a page over 16 URL partitions that is
    # 1,600 x 20 / 16 = 2,000 units a second on each, past DynamoDB's 1,000.
    site = Site(latency_s=0.5, concurrency=100, concurrency_per_domain=100)
    outcome = play(Night((100,) * 16, site, stack(fetcher_max_concurrency=16)), QUOTAS, figures(write_units=20.0))
    assert outcome.busiest_partition[1] == pytest.approx(2000.0)
    assert any(limit.startswith("DynamoDB writes on url#RUN#H") for limit in outcome.limits_crossed)


def test_the_in_flight_quota_holds_receives_back_and_is_named() -> None:
    # In-flight quota scaled down to 25 messages: 10 fetchers could hold 10 hosts' 10 messages (100), but
    # only 2 full batches and a 5-message one fit; the rest wait, and the limit is named.
    site = Site(latency_s=0.1, concurrency=2, concurrency_per_domain=2)
    quotas = QUOTAS.scaled(sqs_fifo_in_flight=25)
    outcome = play(Night((100,) * 10, site, stack(fetcher_max_concurrency=10)), quotas, figures())
    assert outcome.sqs_in_flight_peak == 25
    assert any(limit.startswith("SQS FIFO in-flight messages") for limit in outcome.limits_crossed)


def test_a_fetcher_past_its_timeout_is_named() -> None:
    # cap 1 at 2 s a page: a batch of 100 URLs takes 200 s, past the fetcher's 120 s timeout.
    site = Site(latency_s=2.0, concurrency=1, concurrency_per_domain=1)
    outcome = play(Night((100,), site, stack()), QUOTAS, figures())
    assert outcome.functions["fetcher"].longest_s == pytest.approx(200.0)
    assert any(limit.startswith("fetcher: an invocation needs 200 s") for limit in outcome.limits_crossed)


def test_the_fan_out_takes_its_sends_and_continues_near_the_timeout() -> None:
    # With 10 ms a call: a step of 1,000 tasks is 100 messages, 10 requests, 8 in flight: 2 rounds, 20 ms.
    # 1,000,000 seeds = 1,000 steps = 20 s, in one scheduler invocation.
    site = Site(latency_s=0.1, concurrency=100, concurrency_per_domain=100)
    timed = replace(stack(), aws_call_s=0.010)
    outcome = play(Night((1_000_000,), site, timed, fan_out="seed-order"), QUOTAS, figures())
    assert outcome.phases["fan_out_s"] == pytest.approx(20.0)
    assert outcome.functions["scheduler"].invocations == 1
    # A 30 s timeout: the fan-out continues in fresh invocations when under 60 s are left (at once, here).
    short = replace(timed, scheduler_timeout_s=30.0)
    outcome = play(Night((1_000_000,), site, short, fan_out="seed-order"), QUOTAS, figures())
    assert outcome.functions["scheduler"].invocations > 1


def test_a_night_without_urls_is_refused() -> None:
    site = Site(latency_s=0.1, concurrency=1, concurrency_per_domain=1)
    with pytest.raises(ValueError, match="at least one host"):
        play(Night((), site, stack()), QUOTAS, figures())


def test_the_backlogs_gets_are_the_measured_slopes_not_counted_again_from_the_waves() -> None:
    # The round-robin fan-out sends a host's next wave from its chunk object (a GET a wave, played as time), but
    # make cost's slope already holds a page's share of that GET: 4,000 URLs at 0.01 GET a page are 40 GETs,
    # whatever number of waves the night plays (here 1 host x 400 messages, 20 at a time: 19 refills).
    site = Site(latency_s=0.1, concurrency=10, concurrency_per_domain=10)
    night = Night((4_000,), site, stack(host_backlog_messages=20), fan_out="round-robin")
    outcome = play(night, QUOTAS, figures(s3_gets=0.01))
    assert outcome.usage.s3_gets == 40


def test_each_function_starts_from_its_own_base_memory() -> None:
    # The scheduler holds 8 bytes a seed twice over its base (100,000 seeds: 1.6 MB); a finalize shard its
    # pages' memory over its own (16 shards of 6,250 pages at 1 KB: 6.25 MB); the fetcher its base alone.
    site = Site(latency_s=0.1, concurrency=100, concurrency_per_domain=100)
    bases = {"fetcher": 90.0, "scheduler": 120.0, "finalizer": 150.0}
    outcome = play(Night((10_000,) * 10, site, stack()), QUOTAS, figures(base_rss_mb=bases, finalize_mb=0.001))
    assert outcome.shards == 16
    assert outcome.functions["fetcher"].memory_mb == pytest.approx(90.0)
    assert outcome.functions["scheduler"].memory_mb == pytest.approx(120.0 + 1.6)
    assert outcome.functions["finalizer"].memory_mb == pytest.approx(150.0 + 6.25)

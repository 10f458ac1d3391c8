"""One night of the deployed stack, played as a discrete-event simulation (a heap of timed events).

What it plays, in the stack's own terms:

- **the fan-out**: the scheduler sends tasks 10 to a message, ``send_chunk_tasks`` a step, its
  ``send_requests_in_flight`` SendMessageBatch requests at a time, each an AWS call; an invocation
  that nears its timeout continues in a fresh one (a cold start). ``seed-order`` sends every host's
  messages as the seed file lists them (the old fan-out); ``round-robin`` sends one message of each
  host a round, at most ``host_backlog_messages`` a host, and the fetcher that ends a host's wave
  sends its next one (read from the run's chunk objects in S3: a GET, then the sends);
- **the queue** (:mod:`.queue`): a group per host, one batch in flight a group, the head window and
  the in-flight quota;
- **the fetchers**: at most ``fetcher_max_concurrency`` invocations, each receiving a batch of up
  to ``batch_size`` messages and packing (up to ``pack_receives`` more receives while its hosts x
  their cap fall short of the spec's concurrency); an invocation lasts as long as its slowest
  host takes at its cap and latency (or min delay), or its pages at the spec's concurrency, or its
  CPU at the function's share of a vCPU, plus its sequential AWS calls;
- **the finalizer**: one invocation counting and copying every page (``single``, the old one), or
  ``shards`` invocations of at most ``finalize_shard_pages`` pages, ``finalizer_shard_max_concurrency``
  at a time, then the combine step (``sharded``).

It records what a night needs of each function and service, prices it with the project's price
table (``sluice.domain.cost``) and names every limit it crosses.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from sluice.domain.cost import US_EAST_1, PriceList, RunUsage
from sluice_tools.scale.inputs import COLD_START_S, COMBINE_BASE_S, S3_BYTES_PER_S, Measured, Site, Stack
from sluice_tools.scale.queue import FifoQueue, Taken
from sluice_tools.scale.quotas import Quotas

FanOut = Literal["seed-order", "round-robin"]
Finalizer = Literal["single", "sharded"]
BatchOrder = Literal["by-message", "interleaved"]
URL_PARTITIONS = 16
"""The run's URL entries spread over 16 partition keys (``url#ID#H``), as the frontier shards them."""
PROGRESS_ITEMS = 16
"""Progress shards, all under one partition key (``progress#ID``): each batch writes one, reads all 16."""
SEED_BYTES = 8
"""The seed set: 8 bytes a seed (infra/config.py's scheduler memory note), held twice while it is sorted."""
MAX_EVENTS = 5_000_000
"""The model stops (an error) rather than run past this many events: every night it plays is bounded."""


@dataclass(frozen=True, slots=True)
class Night:
    """What to play: URLs per host in seed-file order, how the sites answer, the stack and its mechanisms."""

    hosts: tuple[int, ...]
    site: Site
    stack: Stack
    fan_out: FanOut = "round-robin"
    finalizer: Finalizer = "sharded"
    shared_cpu: bool = False
    """The local runner: every worker shares one event loop, so all pages' CPU queues on one core."""
    cpu_share: float = 1.0
    """With ``shared_cpu``: the part of a core the runner gets (1 on a quiet machine)."""
    batch_overhead_s: float | None = None
    """A batch's own time besides its pages (default: its sequential AWS calls)."""
    head_window: float | None = None
    """The queue's head window (default: SQS FIFO's quota; the local queue has none)."""
    batch_order: BatchOrder = "interleaved"
    """The order a batch's URLs take the spec's ``concurrency`` slots in: ``interleaved`` (one URL of each
    host in turn, as ``pipeline/visit/batch.py`` does), or ``by-message``, as it did before (a URL holds its slot
    while it waits on its host's cap)."""

    @property
    def urls(self) -> int:
        return sum(self.hosts)


@dataclass
class FunctionUse:
    """One function's night: invocations, the most at once, the longest, the most memory, GB-seconds."""

    invocations: int = 0
    peak_concurrency: int = 0
    longest_s: float = 0.0
    memory_mb: float = 0.0
    gb_s: float = 0.0

    def add(self, seconds: float, memory_mb: float, configured_mb: int) -> None:
        self.invocations += 1
        self.longest_s = max(self.longest_s, seconds)
        self.memory_mb = max(self.memory_mb, memory_mb)
        self.gb_s += seconds * configured_mb / 1024


@dataclass
class Outcome:
    """What the night took and needed."""

    wall_s: float
    bound_s: float
    bound_by: str
    phases: dict[str, float]
    critical_path: str
    functions: dict[str, FunctionUse]
    busiest_partition: tuple[str, float, float]
    """(partition key, write units a second, read units a second) at its busiest second."""
    busiest_prefix: tuple[str, float, float]
    """(prefix, PUT-class a second, GET-class a second) at its busiest second."""
    sqs_in_flight_peak: int
    sqs_backlog_peak: int
    sqs_requests_peak: float
    hosts_in_first_window: int
    host_done_s: list[float]
    host_first_s: list[float]
    window_blocked_s: float
    limits_crossed: list[str]
    settings_to_raise: list[str]
    usage: RunUsage
    usd: float
    events: int
    shards: int = 1
    burst_url_wcu: float = 0.0
    """Write units a second on a URL partition in the single busiest second (lockstep batch ends)."""


@lru_cache(maxsize=65_536)
def batch_rounds(pages: tuple[int, ...], concurrency: int, cap: int, order: BatchOrder) -> int:
    """Round trips a batch takes: its URLs take ``concurrency`` slots in ``order``, first come first served,
    and a URL holding a slot waits while its host already has ``cap`` requests out.

    Exact when every request takes the same time: each round every host answers min(cap, its URLs
    holding slots), and the slots they free go to the next URLs in order. With the batch's URLs in
    message order, a host's URLs can fill every slot while only ``cap`` of them run, and the hosts
    behind them wait (head-of-line blocking): packing then buys less than hosts x cap."""
    if order == "by-message":
        sequence = [h for h, n in enumerate(pages) for _ in range(n)]
    else:
        sequence = []
        left = list(pages)
        while any(left):
            for h, n in enumerate(left):
                if n:
                    sequence.append(h)
                    left[h] -= 1
    held = [0] * len(pages)
    admitted = min(concurrency, len(sequence))
    for h in sequence[:admitted]:
        held[h] += 1
    done = rounds = 0
    while done < len(sequence):
        rounds += 1
        freed = 0
        for h, k in enumerate(held):
            if k:
                n = min(cap, k)
                held[h] -= n
                freed += n
        done += freed
        for h in sequence[admitted : admitted + freed]:
            held[h] += 1
        admitted = min(len(sequence), admitted + freed)
    return rounds


def lower_bound(night: Night) -> tuple[float, str]:
    """The shortest night politeness and the fleet allow, and which sets it (``host N`` or ``fleet``).

    max(each host's URLs / its polite rate, all URLs / the fleet's rate at the stack's maximum),
    the fleet's rate being its most invocations, each at the spec's concurrency, over the latency."""
    rate = night.site.host_rate
    biggest = max(range(len(night.hosts)), key=lambda h: night.hosts[h])
    host_s = night.hosts[biggest] / rate
    fleet_rate = night.stack.fetcher_max_concurrency * night.site.concurrency / night.site.latency_s
    fleet_s = night.urls / fleet_rate
    return (
        (host_s, f"host {biggest + 1} ({night.hosts[biggest]:,} URLs at {rate:.1f} pages/s)")
        if host_s >= fleet_s
        else (
            fleet_s,
            f"fleet ({night.stack.fetcher_max_concurrency} fetchers x {night.site.concurrency} / "
            f"{night.site.latency_s:g} s = {fleet_rate:,.0f} pages/s)",
        )
    )


class _Play:
    """The event loop and everything it counts."""

    def __init__(self, night: Night, quotas: Quotas, measured: Measured) -> None:
        self.night, self.q, self.m = night, quotas, measured
        stack, hosts = night.stack, night.hosts
        per_msg = stack.urls_per_message
        self.messages = [math.ceil(u / per_msg) for u in hosts]
        self.urls_left = list(hosts)
        self.unsent = list(self.messages)
        """Messages not yet in the queue (round-robin: waiting in the run's chunk objects)."""
        total = sum(self.messages)
        wave = stack.host_backlog_messages
        capacity = len(hosts) + (total if night.fan_out == "round-robin" else 0) + 1
        if night.fan_out == "round-robin":
            capacity = sum(min(wave, m) for m in self.messages) + total // max(1, wave) + len(hosts) + 1
        window = night.head_window if night.head_window is not None else quotas["sqs_fifo_head_window"]
        self.queue = FifoQueue(len(hosts), capacity, window)
        self.slots = min(stack.fetcher_max_concurrency, int(quotas["lambda_sqs_maximum_concurrency"]))
        self.idle = self.slots
        self.events: list[tuple[float, int, str, object]] = []
        self.seq = 0
        self.now = 0.0
        self.count = 0
        self.fetcher = FunctionUse()
        self.scheduler = FunctionUse()
        self.finalizer = FunctionUse()
        self.busy = 0
        self.pages_at: Counter[int] = Counter()
        self.batches_at: Counter[int] = Counter()
        self.requests_at: Counter[int] = Counter()
        self.refills_at: Counter[int] = Counter()
        self.host_done = [0.0] * len(hosts)
        self.fetch_end = 0.0
        self.fan_out_end = 0.0
        self.sqs_requests = 0
        self.backlog_peak = 0
        self.in_flight_peak = 0
        self.first_window = 0
        self.wave_left = [0] * len(hosts)
        """Round-robin: messages of the host's current wave still to be visited."""
        self.done_pages = 0
        self.host_first = [math.inf] * len(hosts)
        """When each host's first batch began."""
        self.window_short = 0
        """Invocations that began short of the hosts their concurrency wanted while the window hid free groups."""
        self.cpu_free_at = 0.0
        """The local runner's one core: when the CPU already asked of it is done."""
        self.blocked_since: float | None = None
        self.blocked_s = 0.0
        """Time fetchers sat idle while free groups' messages waited past the head window."""

    # the event loop ----------------------------------------------------------------------------

    def at(self, when: float, kind: str, data: object = None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, kind, data))

    def run(self) -> None:
        self.at(0.0, "fan-out", 0)
        while self.events:
            self.count += 1
            if self.count > MAX_EVENTS:
                raise RuntimeError(f"the model passed {MAX_EVENTS:,} events: a night this size needs coarser steps")
            self.now, _, kind, data = heapq.heappop(self.events)
            if kind == "fan-out":
                self._fan_out_step(int(data))  # type: ignore[call-overload]
            elif kind == "done":
                self._batch_done(data)  # type: ignore[arg-type]
            self._dispatch()

    # the scheduler -----------------------------------------------------------------------------

    def _send_time(self, messages: int) -> float:
        stack = self.night.stack
        requests = math.ceil(messages / self.q["sqs_batch_messages"])
        return math.ceil(requests / stack.send_requests_in_flight) * stack.aws_call_s

    def _wave(self, host: int) -> int:
        n = min(self.night.stack.host_backlog_messages, self.unsent[host])
        self.wave_left[host] = n
        return n

    def _send(self, host: int, messages: int) -> None:
        if messages <= 0:
            return
        self.unsent[host] -= messages
        self.queue.send(host, messages)
        self.backlog_peak = max(self.backlog_peak, self.queue.stored)

    def _fan_out_plan(self) -> list[tuple[int, int]]:
        """(host, messages) in the order the scheduler sends them."""
        if self.night.fan_out == "seed-order":
            return [(h, m) for h, m in enumerate(self.messages) if m]
        wave = self.night.stack.host_backlog_messages
        firsts = [min(wave, m) for m in self.messages]
        for h, n in enumerate(firsts):
            self.wave_left[h] = n
        plan: list[tuple[int, int]] = []
        for round_ in range(max(firsts, default=0)):
            plan.extend((h, 1) for h, n in enumerate(firsts) if n > round_)
        return plan

    def _fan_out_step(self, offset: int) -> None:
        """Send the next second or so of the fan-out; continue in a fresh invocation near the timeout."""
        stack = self.night.stack
        if offset == 0:
            self.plan = self._fan_out_plan()
            self.plan_at = 0
            self.invocation_started = 0.0
            self.step_messages = stack.send_chunk_tasks // stack.urls_per_message
        chunk_s = self._send_time(self.step_messages)
        per_event = max(1, int(1.0 / chunk_s)) * self.step_messages if chunk_s > 0 else sum(self.messages)
        sent = 0
        while sent < per_event and self.plan_at < len(self.plan):
            host, messages = self.plan[self.plan_at]
            take = min(messages, per_event - sent)
            self._send(host, take)
            sent += take
            if take == messages:
                self.plan_at += 1
            else:
                self.plan[self.plan_at] = (host, messages - take)
        step_s = math.ceil(sent / self.step_messages) * chunk_s
        self.sqs_requests += math.ceil(sent / self.q["sqs_batch_messages"])
        self.requests_at[int(self.now)] += math.ceil(sent / self.q["sqs_batch_messages"])
        if self.plan_at < len(self.plan):
            elapsed = self.now + step_s - self.invocation_started
            if stack.scheduler_timeout_s - elapsed < max(60.0, 4 * chunk_s):
                self._scheduler_invocation(elapsed)
                self.invocation_started = self.now + step_s + COLD_START_S
                self.at(self.invocation_started, "fan-out", offset + sent)
            else:
                self.at(self.now + step_s, "fan-out", offset + sent)
            return
        end = self.now + step_s
        if self.night.fan_out == "round-robin":
            # The rest of every host's seeds go to its chunk object: one PUT a host, 8 in flight.
            end += math.ceil(len(self.night.hosts) / stack.send_requests_in_flight) * stack.aws_call_s
        self._scheduler_invocation(end - self.invocation_started)
        self.fan_out_end = end
        self.first_window = sum(
            1
            for h, g in enumerate(self.queue.groups)
            if g.held or self.queue.visible_head(g) or self.urls_left[h] < self.night.hosts[h]
        )

    def _scheduler_invocation(self, seconds: float) -> None:
        memory = self.m.base_rss_mb["scheduler"] + 2 * SEED_BYTES * self.night.urls / 1e6
        self.scheduler.add(seconds, memory, self.night.stack.scheduler_memory_mb)
        self.scheduler.peak_concurrency = 1

    # the fetchers ------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Give every idle fetcher a batch, then let the new invocations pack, one receive each a round.

        Invocations that start together pack together (each packs at its own start), so hosts are
        shared among them as the event source's batches arrive, not all taken by the first."""
        stack, site = self.night.stack, self.night.site
        quota = self.q["sqs_fifo_in_flight"]
        wanted = math.ceil(site.concurrency / site.concurrency_per_domain)
        started: list[tuple[list[tuple[int, Taken]], set[int], list[int]]] = []
        while self.idle > 0:
            batch = self.queue.receive(stack.batch_size, quota)
            if not batch:
                break
            self.idle -= 1
            started.append((batch, {h for h, _ in batch}, [1]))
        self._watch_window()
        if not started:
            return
        packing = [s for s in started if len(s[1]) < wanted]
        if packing and self.queue.window_blocked:
            self.window_short += len(packing)  # short of hosts while the window hid free groups
            packing = []
        for _ in range(stack.pack_receives):
            if not packing:
                break
            still = []
            for batch, hosts, receives in packing:
                more = self.queue.receive(stack.batch_size, quota)
                receives[0] += 1
                if more:
                    batch += more
                    hosts.update(h for h, _ in more)
                if len(hosts) < wanted and self.queue.window_blocked:
                    self.window_short += 1
                elif more and len(hosts) < wanted:
                    still.append((batch, hosts, receives))
            packing = still
        for batch, hosts, receives in started:
            for host in hosts:
                self.host_first[host] = min(self.host_first[host], self.now)
            self.sqs_requests += receives[0]
            self.requests_at[int(self.now)] += receives[0]
            self.busy += 1
            seconds, pages, refills = self._batch_time(batch, receives[0])
            self.fetcher.add(seconds, self.m.base_rss_mb["fetcher"], stack.fetcher_memory_mb)
            self.at(self.now + seconds, "done", (batch, pages, refills))
        self.fetcher.peak_concurrency = max(self.fetcher.peak_concurrency, self.busy)
        self.in_flight_peak = max(self.in_flight_peak, self.queue.in_flight)

    def _watch_window(self) -> None:
        """Count the time fetchers wait idle on messages the head window hides."""
        blocked = self.idle > 0 and self.queue.window_blocked
        if blocked and self.blocked_since is None:
            self.blocked_since = self.now
        elif not blocked and self.blocked_since is not None:
            self.blocked_s += self.now - self.blocked_since
            self.blocked_since = None

    def _batch_time(self, batch: list[tuple[int, Taken]], receives: int) -> tuple[float, dict[int, int], set[int]]:
        """How long an invocation holding ``batch`` runs, the pages it visits of each host, the hosts
        whose next wave it sends (round-robin: it holds the last message of their wave)."""
        stack, site = self.night.stack, self.night.site
        per_msg = stack.urls_per_message
        pages: dict[int, int] = {}
        refills: set[int] = set()
        for host, taken in batch:
            messages = sum(k for _, k in taken)
            n = min(self.urls_left[host], per_msg * messages)
            self.urls_left[host] -= n
            pages[host] = pages.get(host, 0) + n
            if self.night.fan_out == "round-robin":
                self.wave_left[host] -= messages
                if self.wave_left[host] <= 0 and self.unsent[host] > 0:
                    refills.add(host)
        latency = site.latency_s
        cap = site.concurrency_per_domain
        total = sum(pages.values())
        rounds = batch_rounds(tuple(pages.values()), site.concurrency, cap, self.night.batch_order)
        wait = rounds * latency
        if site.min_delay_s > 0:
            wait = max(wait, max((n - 1) * site.min_delay_s + latency for n in pages.values()))
        if self.night.shared_cpu:
            # One event loop for every worker: the pages' CPU queues on one core, beside their waits.
            start = max(self.cpu_free_at, self.now)
            self.cpu_free_at = start + total * self.m.cpu_s / self.night.cpu_share
            cpu = self.cpu_free_at - self.now
        else:
            share = min(1.0, stack.fetcher_memory_mb / self.q["lambda_mb_per_vcpu"])
            cpu = total * self.m.cpu_s / share
        overhead = self.night.batch_overhead_s
        if overhead is None:
            overhead = stack.sequential_calls_per_batch * stack.aws_call_s
        refill_s = 2 * stack.aws_call_s if refills else 0.0  # a GET of the chunk object, then the sends
        return max(wait, cpu) + overhead + receives * stack.aws_call_s + refill_s, pages, refills

    def _batch_done(self, data: tuple[list[tuple[int, Taken]], dict[int, int], set[int]]) -> None:
        batch, pages, refills = data
        second = int(self.now)
        self.busy -= 1
        self.idle += 1
        self.batches_at[second] += 1
        for host, taken in batch:
            if host in refills:
                # The fetcher that ends a host's wave sent its next before its batch ended (_batch_time).
                self.refills_at[second] += 1
                self.sqs_requests += 1
                self._send(host, self._wave(host))
            self.queue.delete(host, taken)
        for host, n in pages.items():
            self.pages_at[second] += n
            self.done_pages += n
            if self.urls_left[host] == 0 and self.unsent[host] == 0 and not self.queue.groups[host].queued:
                self.host_done[host] = self.now
        self.sqs_requests += 1  # the event source's DeleteMessageBatch
        self.requests_at[second] += 1
        self.fetch_end = max(self.fetch_end, self.now)


def _busiest(per_second: Counter[int], window: int) -> float:
    """The busiest ``window`` seconds' mean a second."""
    if not per_second:
        return 0.0
    sums: Counter[int] = Counter()
    for second, n in per_second.items():
        sums[second // window] += n
    return max(sums.values()) / window


def _finalize(play: _Play, night: Night, quotas: Quotas) -> tuple[float, int, float, float, float]:
    """(seconds, shards, read units a second on the busiest URL partition, GETs and PUTs a second on runs/)."""
    m, stack = play.m, night.stack
    pages = night.urls
    # On AWS its bytes go through S3; the local runner's finalizer reads and writes files (in finalize_s).
    per_page = m.finalize_s / night.cpu_share if night.shared_cpu else m.finalize_s + m.finalize_bytes / S3_BYTES_PER_S
    base = m.base_rss_mb["finalizer"]
    if night.finalizer == "single":
        seconds = COLD_START_S + pages * per_page
        play.finalizer.add(seconds, base + pages * m.finalize_mb, stack.finalizer_memory_mb)
        play.finalizer.peak_concurrency = 1
        reads = pages * m.read_units / URL_PARTITIONS / max(seconds, 1e-9)
        return seconds, 1, reads, pages * m.s3_gets / seconds, 3 / seconds
    shards = URL_PARTITIONS
    while math.ceil(pages / shards) > stack.finalize_shard_pages:
        shards *= 2
    shard_pages = math.ceil(pages / shards)
    shard_s = COLD_START_S + shard_pages * per_page
    at_once = min(shards, stack.finalizer_shard_max_concurrency)
    rounds = math.ceil(shards / at_once)
    for _ in range(shards):
        play.finalizer.add(shard_s, base + shard_pages * m.finalize_mb, stack.finalizer_memory_mb)
    combine_s = COMBINE_BASE_S + shards * stack.aws_call_s
    play.finalizer.add(combine_s, base, stack.finalizer_memory_mb)
    play.finalizer.peak_concurrency = at_once
    # Shards of one URL partition scan it at once: their reads share its 3,000 units a second.
    per_partition = math.ceil(at_once / URL_PARTITIONS)
    reads = per_partition * shard_pages * m.read_units / shard_s
    gets = at_once * shard_pages * m.s3_gets / shard_s
    puts = at_once * 3 / shard_s
    return rounds * shard_s + combine_s, shards, reads, gets, puts


def play(night: Night, quotas: Quotas, measured: Measured, prices: PriceList = US_EAST_1) -> Outcome:
    """Play ``night``; what it took, what it needed, what it costs, and every limit it crossed."""
    if not night.hosts or night.urls <= 0:
        raise ValueError("a night needs at least one host with at least one URL")
    run = _Play(night, quotas, measured)
    run.run()
    stack, m = night.stack, measured
    fetch_end = run.fetch_end
    finalize_s, shards, scan_reads, final_gets, final_puts = _finalize(run, night, quotas)
    trigger = stack.aws_call_s + COLD_START_S
    wall = fetch_end + trigger + finalize_s
    bound, bound_by = lower_bound(night)

    # Sustained rates, the busiest minute's mean a second: a model fleet runs in lockstep (equal batches end in
    # the same second), which real fetchers do not, and a partition absorbs seconds-long bursts (throttled
    # writes are retried by botocore). The busiest single second is recorded beside it.
    per = max(1, min(60, int(fetch_end) + 1))
    busiest_second = _busiest(run.pages_at, per)
    busiest_batches = _busiest(run.batches_at, per)
    burst_pages = max(run.pages_at.values(), default=0)
    url_wcu = busiest_second * m.write_units / URL_PARTITIONS
    progress_rcu = busiest_batches * PROGRESS_ITEMS
    partitions = [
        ("url#RUN#H (each of 16)", url_wcu, max(0.0, scan_reads)),
        ("progress#RUN", float(busiest_batches), float(progress_rcu)),
    ]
    busiest_partition = max(partitions, key=lambda p: max(p[1] / 1000, p[2] / 3000))
    part_puts = busiest_second * m.s3_puts
    prefixes = [
        ("work/CRAWL/RUN/ (parts, seed chunks)", part_puts, _busiest(run.refills_at, per)),
        ("runs/CRAWL/RUN/ (finalizer)", final_puts, final_gets),
    ]
    busiest_prefix = max(prefixes, key=lambda p: max(p[1] / 3500, p[2] / 5500))

    limits: list[str] = []
    q = quotas

    def crossed(name: str, needed: float, what: str, advice: str) -> None:
        quota = q.quota(name)
        if needed > quota.value:
            limits.append(
                f"{what}: needs {needed:,.0f}, {quota.source} allows {quota.value:,.0f} {quota.unit}; {advice}"
            )

    if stack.fetcher_max_concurrency > q["lambda_sqs_maximum_concurrency"]:
        limits.append(
            f"fetcher_max_concurrency {stack.fetcher_max_concurrency} is above the event source's most "
            f"({q['lambda_sqs_maximum_concurrency']:,.0f}): set at most that"
        )
    # The scheduler's fan-out overlaps the fetchers; the finalizer runs once they are done.
    peak_lambda = max(run.fetcher.peak_concurrency + run.scheduler.peak_concurrency, run.finalizer.peak_concurrency)
    crossed("lambda_account_concurrency", peak_lambda, "Lambda concurrency in the account", "ask AWS Support for more")
    if run.queue.quota_held:
        limits.append(
            f"SQS FIFO in-flight messages: {run.in_flight_peak:,} in flight reached the quota of "
            f"{q['sqs_fifo_in_flight']:,.0f}, holding back {run.queue.quota_held:,} receives; lower "
            "fetcher_max_concurrency or pack_receives, or ask AWS Support for more"
        )
    for label, use, timeout in (
        ("fetcher", run.fetcher, stack.fetcher_timeout_s),
        ("scheduler", run.scheduler, stack.scheduler_timeout_s),
        ("finalizer", run.finalizer, stack.finalizer_timeout_s),
    ):
        memory = {"fetcher": stack.fetcher_memory_mb, "scheduler": stack.scheduler_memory_mb}.get(
            label, stack.finalizer_memory_mb
        )
        if use.longest_s > q["lambda_timeout_s"]:
            limits.append(
                f"{label}: an invocation needs {use.longest_s:,.0f} s, past Lambda's {q['lambda_timeout_s']:,.0f} s"
                + ("; shard the finalizer (finalize_shard_pages)" if label == "finalizer" else "")
            )
        elif use.longest_s > timeout:
            limits.append(f"{label}: an invocation needs {use.longest_s:,.0f} s, past its timeout {timeout:,.0f} s")
        if use.memory_mb > q["lambda_memory_mb"]:
            limits.append(
                f"{label}: needs {use.memory_mb:,.0f} MB, past Lambda's most ({q['lambda_memory_mb']:,.0f} MB)"
                + ("; shard the finalizer" if label == "finalizer" else "")
            )
        elif use.memory_mb > memory:
            limits.append(f"{label}: needs {use.memory_mb:,.0f} MB, past its {memory:,} MB: raise its memory_mb")
    for key, wcu, rcu in partitions:
        crossed("dynamodb_partition_wcu_per_s", wcu, f"DynamoDB writes on {key}", "spread the key over more partitions")
        crossed(
            "dynamodb_partition_rcu_per_s", rcu, f"DynamoDB reads on {key}",
            "lower finalizer_shard_max_concurrency or fetcher_max_concurrency, or spread the key",
        )  # fmt: skip
    for prefix, puts, gets in prefixes:
        crossed("s3_prefix_put_per_s", puts, f"S3 PUTs on {prefix}", "spread the keys over more prefixes")
        crossed("s3_prefix_get_per_s", gets, f"S3 GETs on {prefix}", "spread the keys over more prefixes")
    requests_peak = _busiest(run.requests_at, per)
    crossed(
        "sqs_fifo_high_throughput_requests_per_s",
        requests_peak,
        "SQS requests a second",
        "spread crawls over more queues",
    )
    short = run.window_short / max(1, run.fetcher.invocations)
    if run.blocked_s > 0.01 * fetch_end or short > 0.01:
        window = night.head_window if night.head_window is not None else q["sqs_fifo_head_window"]
        limits.append(
            f"SQS FIFO head window ({window:,.0f} messages): hosts' messages waited behind a backlog the window "
            f"could not see past: fetchers idle {run.blocked_s:,.0f} s, {short:.0%} of invocations short of hosts, "
            f"the last host began at {max(run.host_first):,.0f} s; use the round-robin fan-out with "
            "host_backlog_messages"
        )
    settings: list[str] = []
    if wall > stack.run_deadline_s:
        hours = math.ceil(wall / 3600)
        if bound_by.startswith("fleet"):
            # The fleet sets the pace: more fetchers shorten the night (each at the spec's concurrency).
            per_fetcher = night.site.concurrency / night.site.latency_s
            fetchers = math.ceil(night.urls * wall / bound / (stack.run_deadline_s * per_fetcher) / 10) * 10
            settings.append(
                f"run_deadline_hours {stack.run_deadline_s / 3600:g} < the {wall / 3600:.1f} h this night needs: "
                f"raise fetcher_max_concurrency to {fetchers} (the fleet sets the pace), "
                f"or run_deadline_hours to {hours}"
            )
        else:
            settings.append(
                f"run_deadline_hours {stack.run_deadline_s / 3600:g} < the {wall / 3600:.1f} h this night needs: "
                f"raise it to {hours} (its biggest host sets the pace: more fetchers do not help), or the spec's "
                "concurrency_per_domain if that site allows"
            )

    usage = RunUsage(
        write_units=night.urls * m.write_units,
        read_units=night.urls * m.read_units,
        s3_puts=math.ceil(night.urls * m.s3_puts) + shards * 3,
        # The backlog's GET a wave is in the measured slope (a page's share of its host's wave): not added again.
        s3_gets=math.ceil(night.urls * m.s3_gets),
        sqs_requests=float(run.sqs_requests),
        lambda_gb_s=run.fetcher.gb_s + run.scheduler.gb_s + run.finalizer.gb_s,
        lambda_requests=run.fetcher.invocations + run.scheduler.invocations + run.finalizer.invocations,
        log_bytes=int(night.urls * m.log_bytes),
    )
    usd = usage.price(prices)["total"]
    phases = {"fan_out_s": run.fan_out_end, "fetch_s": fetch_end, "finalize_s": finalize_s}
    pace = "the sites" if bound_by.startswith("host") else "the fleet"
    path = (
        f"fan-out {run.fan_out_end:,.0f} s (overlapping the fetch) -> fetch until {fetch_end:,.0f} s "
        f"(bound {bound:,.0f} s, set by {bound_by}: {pace} set the pace) -> finalize {finalize_s:,.0f} s"
        + (
            f" ({shards} shards, {run.finalizer.peak_concurrency} at a time)"
            if night.finalizer == "sharded"
            else " (one invocation)"
        )
    )
    return Outcome(
        wall_s=wall,
        bound_s=bound,
        bound_by=bound_by,
        phases=phases,
        critical_path=path,
        functions={"scheduler": run.scheduler, "fetcher": run.fetcher, "finalizer": run.finalizer},
        busiest_partition=busiest_partition,
        busiest_prefix=busiest_prefix,
        sqs_in_flight_peak=run.in_flight_peak,
        sqs_backlog_peak=run.backlog_peak,
        sqs_requests_peak=requests_peak,
        hosts_in_first_window=run.first_window,
        host_done_s=run.host_done,
        host_first_s=run.host_first,
        window_blocked_s=run.blocked_s,
        limits_crossed=limits,
        settings_to_raise=settings,
        usage=usage,
        usd=usd,
        events=run.count,
        shards=shards,
        burst_url_wcu=burst_pages * m.write_units / URL_PARTITIONS,
    )

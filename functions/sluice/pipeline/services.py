"""Everything a pipeline step touches, wired once per process: by the handlers on AWS, by the local runner locally."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sluice import defaults
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.ports import Frontier, HostBook, ObjectStore, RecordsTable, RunLedger, SecretSource, ShardTasks, WorkQueue
from sluice.spec import CrawlSpec, find_spec, load_spec, spec_files

if TYPE_CHECKING:
    # the finalizer's alone: the fetcher's cold start skips it
    from sluice.pipeline.finalize.columnar import ParquetCopy

Trigger = Callable[[dict[str, object]], None]


class UnknownCrawl(LookupError):
    """No spec of that name ships with the functions."""


@dataclass(frozen=True, slots=True)
class Tuning:
    """The numbers the steps run by (the stack's settings, or the local runner's); defaults: :mod:`sluice.defaults`."""

    max_receive_count: int = defaults.MAX_RECEIVE_COUNT
    """A message's last receive: a transient failure then counts as failed, so the run can finish."""
    run_deadline_hours: float = defaults.RUN_DEADLINE_HOURS
    visibility_base_s: float = defaults.VISIBILITY_BASE_S
    """First visibility backoff of a message returned for a transient failure; doubles per receive."""
    visibility_max_s: float = defaults.VISIBILITY_MAX_S
    catalog_max_age_days: float = defaults.CATALOG_MAX_AGE_DAYS
    """A catalog run older than this is not seeded from (its URL items expire with the ledger's TTL)."""
    allow_loopback: bool = False
    """Only the local runner and tests set this; the stack never does."""
    output_span_bytes: int = 8 * 1024 * 1024
    """The finalizer reads sources in ranges of up to this much (S3: large ranges, few requests)..."""
    output_readers: int = 8
    """...this many at once: its read buffers stay under ``output_span_bytes x output_readers``."""
    urls_per_message: int = defaults.URLS_PER_MESSAGE
    batch_size: int = defaults.BATCH_SIZE
    pack_receives: int = defaults.PACK_RECEIVES
    """Receives a fetcher may add to a batch whose hosts leave the crawl's concurrency unused (0: none)."""
    host_backlog_messages: int = defaults.HOST_BACKLOG_MESSAGES
    """Messages of one host the fan-out puts in the queue at once; the rest follow in waves (0: no cap)."""
    early_write_urls: int = defaults.EARLY_WRITE_URLS
    """A batch of at least this many URLs writes its first half while its second half is fetched
    (``sluice.pipeline.visit.writer``; 0: a batch is written whole once fetched). Off on AWS: the split costs a
    second part PUT a batch (``make cost``: about +6% a run) for about 3% of an invocation's time. On
    for the local runner, where parts are files and the write was a third of a single host's batch."""
    fetcher_memory_mb: int = defaults.FETCHER_MEMORY_MB
    finalizer_memory_mb: int = defaults.FINALIZER_MEMORY_MB
    """What the stack gives the functions: the run's cost estimate prices their time with it."""
    egress_ips: tuple[str, ...] = ()
    """With the stack's ``egress: fixed``, the addresses every request leaves from (a run's summary names them)."""
    finalize_shard_pages: int = defaults.FINALIZE_SHARD_PAGES
    """Pages a finalize shard holds at most: the shard count is the smallest power of two that keeps to it."""
    finalize_max_shards: int = defaults.FINALIZE_MAX_SHARDS
    """Shards a run may have (4096 x 50,000 = 200M pages); a run that needs more ends failed, saying so."""
    finalize_workers: int = 4
    """Shard tasks run at once where they run on a thread pool (locally; the stack queues them)."""
    finalize_attempts: int = defaults.FINALIZE_ATTEMPTS
    """Finalizing attempts a run gets (the sweep starts another after 20 minutes); then it ends failed."""


@dataclass(frozen=True)
class Services:
    """The ports and triggers a step uses, so that Lambda, the local runner and tests wire it the same way."""

    tuning: Tuning
    ledger: RunLedger
    frontier: Frontier
    queue: WorkQueue
    objects: ObjectStore
    specs_dir: Path
    finalize_later: Trigger
    """Asks for a finalizer run (an async Lambda invoke on AWS, a call queued for the runner locally)."""
    continue_start: Trigger
    """Asks for the scheduler to continue a large fan-out in a fresh invocation."""
    records: RecordsTable | None = None
    """The records table, for specs with ``output.records_table`` (None where the stack has none)."""
    hosts: HostBook | None = None
    """What the fleet knows of each target host between batches (None: one fetcher alone, as in unit tests)."""
    secrets: SecretSource | None = None
    """Where the secrets a spec's ``request`` section names are read (None: a spec that names one fails its pages)."""
    finalize_shards: ShardTasks | None = None
    """Where finalize shard tasks go: None runs them on a thread pool in the caller (locally, in tests, reextract)."""
    parquet: ParquetCopy | None = None
    """Where a finalized run's records are copied as Parquet (Athena on AWS; None: not here, as locally)."""
    clock: Clock = SYSTEM_CLOCK
    """The pipeline's one clock (:mod:`sluice.domain.clock`): ``clock()`` is epoch seconds (when a page is fetched,
    whether its recrawl interval has run out), ``clock.now()`` the same moment as a UTC datetime (run deadlines,
    the catalog's age). The adapters were built with the same one; tests move it on instead of sleeping."""

    def spec(self, crawl: str) -> CrawlSpec:
        return load_crawl(self.specs_dir, crawl)


@lru_cache(maxsize=64)
def load_crawl(specs_dir: Path, crawl: str) -> CrawlSpec:
    """The spec named ``crawl`` from the specs shipped beside the code (cached per container)."""
    path = find_spec(specs_dir, crawl)
    if path is not None:
        return load_spec(path, named_after_file=True)
    known = [p.stem for p in spec_files(specs_dir)]
    raise UnknownCrawl(f"no crawl named {crawl!r} in {specs_dir.name}/ (known: {', '.join(known) or 'none'})")

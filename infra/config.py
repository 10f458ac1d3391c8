"""Names and settings of the deployed stack: read by the CDK app and by the local runner alike.

Nothing here imports the CDK, so `sluice run` can build the same resources on moto from
the same numbers without installing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sluice import defaults

Egress = Literal["direct", "fixed"]
"""How the crawl's requests leave: from Lambda's shared addresses, or from the stack's own Elastic IPs."""
EGRESS_CHOICES: tuple[Egress, ...] = ("direct", "fixed")
PARQUET_SCAN_MAX_GB = 10_000
"""The most ``parquet_scan_limit_gb`` takes: 10 TB, $50 a copy at $5 per TB (a larger value is likelier a typo)."""

PROJECT_TAG = "project"
STAGE_TAG = "stage"
CRAWL_TAG = "crawl"
"""On the resources of one crawl: its schedule and alarms (a Glue table takes no tags in CloudFormation)."""


@dataclass(frozen=True, slots=True)
class FunctionSettings:
    """One Lambda function: its handler in the shared code asset, memory and timeout."""

    handler: str
    memory_mb: int
    timeout_s: int
    reserved_concurrency: int | None = None


@dataclass(frozen=True, slots=True)
class StackConfig:
    """Everything that must not drift between the stack, the handlers and the local runner (the functions'
    runtime defaults come from :mod:`sluice.defaults`, which ``Settings`` and ``Tuning`` read too)."""

    stage: str = "dev"
    prefix: str = "sluice"
    project: str = "sluice"
    """The ``project`` tag on every resource (with ``stage``; per-crawl resources add ``crawl``)."""
    runtime: str = "python3.13"
    architecture: str = "arm64"
    scheduler: FunctionSettings = field(
        # 8 bytes a seed for the seed set, and its sort: 1,024 MB plans 10 million seeds.
        default_factory=lambda: FunctionSettings("sluice.handlers.scheduler.handler", 1024, 900, 2)
    )
    fetcher: FunctionSettings = field(
        # Mostly waiting on sites: memory for bodies in flight, not CPU (docs/costs.md measures it).
        default_factory=lambda: FunctionSettings("sluice.handlers.fetcher.handler", defaults.FETCHER_MEMORY_MB, 120)
    )
    finalizer: FunctionSettings = field(
        # A finalize shard task (50,000 pages at most) and the combine; reserved: the shard queue's
        # MaximumConcurrency (finalizer_shard_max_concurrency) plus the sweep and the fetchers' triggers.
        default_factory=lambda: FunctionSettings(
            "sluice.handlers.finalizer.handler", defaults.FINALIZER_MEMORY_MB, 900, 18
        )
    )
    # The fetcher's event source: batch size (SQS FIFO's most), and how many fetchers at most. Per-host
    # limits do not depend on it: a host is one queue group, held by one fetcher at a time.
    batch_size: int = defaults.BATCH_SIZE
    fetcher_max_concurrency: int = 20
    pack_receives: int = defaults.PACK_RECEIVES
    """A fetcher whose batch holds too few hosts for its concurrency receives more, at most this often."""
    host_backlog_messages: int = defaults.HOST_BACKLOG_MESSAGES
    """Messages of one host the fan-out queues at once (20 x 10 = 200 URLs); its other seeds wait in S3 and
    follow in waves. Queued messages stay under hosts x this: keep that under FIFO's 120,000 (6,000 hosts)."""
    # Visibility timeout is 6x the fetcher's timeout (AWS's advice for SQS event sources): a batch
    # still being retried by the poller must not become visible to a second fetcher.
    visibility_timeout_factor: int = 6
    max_receive_count: int = defaults.MAX_RECEIVE_COUNT
    dlq_retention_days: int = 14
    queue_retention_days: int = 4
    urls_per_message: int = defaults.URLS_PER_MESSAGE
    claim_ttl_days: int = defaults.CLAIM_TTL_DAYS
    """A run's URL entries live this long: the next run seeds from them, so a crawl runs at least this often."""
    work_retention_days: int = 14
    outputs_ia_days: int = 30
    outputs_glacier_ir_days: int = 90
    """Run outputs (``runs/``) and the raw archive (``archive/``) age alike: infrequent access after 30 days,
    Glacier Instant Retrieval after 90 (a range read still answers at once); neither expires."""
    log_retention_days: int = 30
    run_deadline_hours: int = defaults.RUN_DEADLINE_HOURS
    sweep_minutes: int = 15
    query_scan_limit_gb: int = 20
    """Athena cancels a query of the output that scans more (20 GB: $0.10 at $5 per TB, docs/querying.md)."""
    parquet_scan_limit_gb: int = 150
    """Athena cancels a Parquet copy's ``UNLOAD`` that scans more. The copy reads the whole run's JSON Lines, so
    this is sized to the largest run, not to a person's query: the demo's measured 6.5 KB of records a page
    (docs/querying.md) makes a 10M-page night 65 GB; twice that for pages with more or longer fields is 130 GB;
    150 GB leaves room over that, and costs at most $0.75 a copy cancelled at the cut-off ($5 per TB). The
    copy runs in a workgroup of its own (``parquet_workgroup``), so this does not raise the users' 20 GB."""
    query_results_prefix: str = "query-results/"
    """Where the workgroup writes query results, in the records bucket (nothing of the pipeline's lives there)."""
    query_results_retention_days: int = 7
    egress: Egress = "direct"
    """``fixed``: the functions that fetch run in a VPC's private subnets behind NAT gateways whose Elastic
    IPs a site can allowlist (infra/egress.py); ``direct``: Lambda's shared addresses, no VPC (the default)."""
    nat_gateways: int = 1
    """With fixed egress: one NAT gateway (one address, one zone's outage stops the crawl) or one per zone."""
    egress_azs: int = 2
    egress_cidr: str = "10.42.0.0/16"

    def __post_init__(self) -> None:
        limit = self.parquet_scan_limit_gb
        if not (isinstance(limit, int) and 1 <= limit <= PARQUET_SCAN_MAX_GB):
            raise ValueError(
                f"parquet_scan_limit_gb {limit!r}: whole gigabytes from 1 to {PARQUET_SCAN_MAX_GB:,}"
                " (Athena cancels the Parquet copy of a run whose JSON Lines are larger: size it to the largest run,"
                " docs/querying.md)"
            )
        if self.egress not in EGRESS_CHOICES:
            raise ValueError(f"egress {self.egress!r}: one of {', '.join(EGRESS_CHOICES)}")
        if not 1 <= self.nat_gateways <= self.egress_azs:
            raise ValueError(
                f"nat_gateways {self.nat_gateways}: from 1 (one address) to {self.egress_azs} (one per zone)"
            )

    # Finalizing in shards of the URL-hash keyspace (docs/architecture.md, "Knowing a run is done"): shard
    # tasks go through a standard SQS queue to the finalizer, at most this many at once.
    finalize_shard_pages: int = defaults.FINALIZE_SHARD_PAGES
    """Pages a finalize shard holds at most (10M pages: 256 shards of about 39,000)."""
    finalize_max_shards: int = defaults.FINALIZE_MAX_SHARDS
    """Shards a run may have (200M pages at the default size); a run needing more ends failed, saying so."""
    finalizer_shard_max_concurrency: int = 16
    """Shard tasks running at once (the event source mapping's MaximumConcurrency, 2 to 1,000). 16, one a URL
    partition on average: at 50, a 10M-URL night's shard scans asked about 5,400 read units a second of each
    of the run's 16 URL partitions, past the 3,000 one takes (``make scale``); at 16 they stay under it."""
    finalize_attempts: int = defaults.FINALIZE_ATTEMPTS
    """Finalizing attempts of one run (the sweep begins another after 20 minutes) before it ends failed."""

    def name(self, part: str) -> str:
        """A physical resource name: ``sluice-dev-ledger``."""
        return f"{self.prefix}-{self.stage}-{part}"

    @property
    def tags(self) -> dict[str, str]:
        """The tags on the stack and every resource in it that takes tags."""
        return {PROJECT_TAG: self.project, STAGE_TAG: self.stage}

    @property
    def queue_name(self) -> str:
        return self.name("frontier") + ".fifo"

    @property
    def dlq_name(self) -> str:
        return self.name("frontier-dlq") + ".fifo"

    @property
    def finalize_queue_name(self) -> str:
        return self.name("finalize-shards")

    @property
    def finalize_dlq_name(self) -> str:
        return self.name("finalize-shards-dlq")

    @property
    def ledger_table(self) -> str:
        return self.name("ledger")

    @property
    def records_table(self) -> str:
        return self.name("records")

    @property
    def glue_database(self) -> str:
        """The Glue database of the crawls' tables: ``sluice_dev`` (an Athena name needs no quoting without ``-``)."""
        return f"{self.prefix}_{self.stage}".replace("-", "_")

    @property
    def workgroup(self) -> str:
        """The users' workgroup (``query_scan_limit_gb``), which the query policy grants."""
        return self.name("query")

    @property
    def parquet_workgroup(self) -> str:
        """The Parquet copy's own workgroup: the finalizer's ``UNLOAD``s, cut off at ``parquet_scan_limit_gb``."""
        return self.name("parquet-copy")

    @property
    def parquet_results_prefix(self) -> str:
        """Where the copy's workgroup writes each ``UNLOAD``'s manifest: inside the query results (same lifecycle),
        in a folder of its own, so the finalizer may write there and not read the users' query results."""
        return f"{self.query_results_prefix}parquet-copy/"

    @property
    def parquet_bytes_scanned_cutoff(self) -> int:
        return self.parquet_scan_limit_gb * 1_000_000_000

    @property
    def query_policy(self) -> str:
        """The managed policy to attach to whoever queries the output."""
        return self.name("query-output")

    @property
    def query_bytes_scanned_cutoff(self) -> int:
        return self.query_scan_limit_gb * 1_000_000_000

    @property
    def dashboard(self) -> str:
        return self.name("runs")

    @property
    def finalizer_function(self) -> str:
        return self.name("finalizer")

    @property
    def scheduler_function(self) -> str:
        return self.name("scheduler")

    @property
    def visibility_timeout_s(self) -> int:
        return self.fetcher.timeout_s * self.visibility_timeout_factor

    def function_settings(self) -> dict[str, Any]:
        """The functions' settings that come from this config (the rest name deployed resources)."""
        return {
            "finalizer_function": self.finalizer_function,
            "scheduler_function": self.scheduler_function,
            "max_receive_count": self.max_receive_count,
            "urls_per_message": self.urls_per_message,
            "run_deadline_hours": self.run_deadline_hours,
            "claim_ttl_days": self.claim_ttl_days,
            "batch_size": self.batch_size,
            "pack_receives": self.pack_receives,
            "host_backlog_messages": self.host_backlog_messages,
            "fetcher_memory_mb": self.fetcher.memory_mb,
            "finalizer_memory_mb": self.finalizer.memory_mb,
            "egress": self.egress,
            "finalize_shard_pages": self.finalize_shard_pages,
            "finalize_max_shards": self.finalize_max_shards,
            "finalize_attempts": self.finalize_attempts,
            "workgroup": self.parquet_workgroup,  # the finalizer's copy, never the users' workgroup
            "glue_database": self.glue_database,
        }

    def bucket_name(self, account: str, region: str) -> str:
        """Bucket names are global: the account and region make them unique."""
        return f"{self.prefix}-{self.stage}-records-{account}-{region}"


DEFAULT = StackConfig()

"""Runtime settings of the Lambda functions, read from the environment once, at cold start, and validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sluice import defaults
from sluice.pipeline.services import Tuning

ENV_PREFIX = "SLUICE_"


class SettingsError(RuntimeError):
    """The function's environment is incomplete or wrong; the text names each variable."""


class Settings(BaseModel):
    """Where everything is. The stack sets these; the local runner sets the same names.

    The tuning defaults are :mod:`sluice.defaults`' (the stack's and ``Tuning``'s too)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    ledger_table: str = Field(min_length=3)
    records_table: str = ""
    """The records table, for specs with ``output.records_table`` (empty: the stack has none)."""
    bucket: str = Field(min_length=3)
    queue_url: str = Field(pattern=r"^https?://")
    specs_dir: Path
    finalizer_function: str = ""
    scheduler_function: str = ""
    max_receive_count: int = Field(default=defaults.MAX_RECEIVE_COUNT, ge=1, le=1000)
    urls_per_message: int = Field(default=defaults.URLS_PER_MESSAGE, ge=1, le=50)
    run_deadline_hours: float = Field(default=defaults.RUN_DEADLINE_HOURS, gt=0, le=168)
    claim_ttl_days: int = Field(default=defaults.CLAIM_TTL_DAYS, ge=2, le=365)
    """How long a run's URL entries live: the next run seeds from them (its catalog)."""
    visibility_base_s: float = Field(default=defaults.VISIBILITY_BASE_S, ge=0, le=900)
    """First visibility backoff of a message returned for a transient failure; doubles per receive."""
    visibility_max_s: float = Field(default=defaults.VISIBILITY_MAX_S, ge=0, le=43_200)
    allow_loopback: bool = False
    """Only the local runner and tests set this; the stack never does."""
    batch_size: int = Field(default=defaults.BATCH_SIZE, ge=1, le=10_000)
    pack_receives: int = Field(default=defaults.PACK_RECEIVES, ge=0, le=50)
    """Receives a fetcher may add to a batch of few hosts (``sluice.pipeline.visit.batch._pack``); 0: no packing."""
    host_backlog_messages: int = Field(default=defaults.HOST_BACKLOG_MESSAGES, ge=0, le=12_000)
    """Messages of one host in the queue at once (``sluice.pipeline.start.backlog``); 0 sends every seed at once."""
    early_write_urls: int = Field(default=defaults.EARLY_WRITE_URLS, ge=0, le=10_000)
    """A batch of at least this many URLs is written in chunks while it fetches (0: off, the stack's)."""
    fetcher_memory_mb: int = Field(default=defaults.FETCHER_MEMORY_MB, ge=128, le=10_240)
    finalizer_memory_mb: int = Field(default=defaults.FINALIZER_MEMORY_MB, ge=128, le=10_240)
    egress: Literal["direct", "fixed"] = "direct"
    """How the stack's requests leave: Lambda's shared addresses, or the stack's Elastic IPs (``egress: fixed``)."""
    egress_ips: str = ""
    """With fixed egress, its addresses, comma-separated: what a run's summary names as its route."""
    finalize_queue_url: str = ""
    """The finalize shard tasks' queue (empty: shard tasks run on a thread pool in the finalizer itself)."""
    finalize_shard_pages: int = Field(default=defaults.FINALIZE_SHARD_PAGES, ge=1, le=10_000_000)
    finalize_max_shards: int = Field(default=defaults.FINALIZE_MAX_SHARDS, ge=1, le=65_536)
    finalize_attempts: int = Field(default=defaults.FINALIZE_ATTEMPTS, ge=1, le=100)
    workgroup: str = ""
    """The Athena workgroup the finalizer starts each run's Parquet copy in (empty: no copy)."""
    glue_database: str = ""
    """The Glue database of the crawls' tables, which the copy reads."""

    def tuning(self) -> Tuning:
        return Tuning(
            max_receive_count=self.max_receive_count,
            run_deadline_hours=self.run_deadline_hours,
            visibility_base_s=self.visibility_base_s,
            visibility_max_s=self.visibility_max_s,
            catalog_max_age_days=defaults.catalog_max_age_days(self.claim_ttl_days),
            allow_loopback=self.allow_loopback,
            urls_per_message=self.urls_per_message,
            batch_size=self.batch_size,
            pack_receives=self.pack_receives,
            host_backlog_messages=self.host_backlog_messages,
            early_write_urls=self.early_write_urls,
            fetcher_memory_mb=self.fetcher_memory_mb,
            finalizer_memory_mb=self.finalizer_memory_mb,
            egress_ips=tuple(ip for ip in self.egress_ips.split(",") if ip),
            finalize_shard_pages=self.finalize_shard_pages,
            finalize_max_shards=self.finalize_max_shards,
            finalize_attempts=self.finalize_attempts,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values = {k[len(ENV_PREFIX) :].lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX)}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{ENV_PREFIX}{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
            )
            raise SettingsError(f"bad environment: {problems}") from None

    def to_env(self) -> dict[str, str]:
        """The environment variables that give these settings (the stack and the local runner use this)."""
        return {f"{ENV_PREFIX}{k.upper()}": str(v).lower() if isinstance(v, bool) else str(v) for k, v in self}

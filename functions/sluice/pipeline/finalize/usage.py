"""A run's AWS usage, counted by its finalizer from the run's own URLs: the inputs of its cost estimate.

Every figure follows from what the pipeline does per URL, per batch and per run (see
docs/costs.md for the same arithmetic, and ``make cost`` for the metered calls it is checked
against). Where the finalizer cannot know a count (invocations, messages), it derives it from the
stack's batch shape; the summary shows the inputs beside the dollars.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.domain.cost import RunUsage, read_units, write_units
from sluice.domain.pages import UrlEntry
from sluice.domain.runs import PROGRESS_SHARDS
from sluice.pipeline.finalize.output import OutputSummary
from sluice.pipeline.services import Tuning

PART_BYTES = 16 * 1024 * 1024
LOG_BYTES_PER_BATCH = 700
LOG_BYTES_PER_PROBLEM = 500
SCHEDULER_S = 1.0


@dataclass
class UsageCounter:
    """Accumulates, entry by entry, what the run's URLs cost to write and read."""

    entries: int = 0
    done: int = 0
    links: int = 0
    problems: int = 0
    item_bytes: int = 0
    result_units: int = 0
    fetch_ms: int = 0
    parts: set[str] = field(default_factory=set)
    run_id: str = ""
    archives: set[str] = field(default_factory=set)
    """This run's archive files (``output.archive``): one PUT each, as a part is."""

    def add(self, entry: UrlEntry, size: int) -> None:
        """Count one URL entry whose item weighs ``size`` bytes (``Frontier.stored_bytes``)."""
        self.entries += 1
        self.links += entry.origin == "link"
        self.item_bytes += size
        result = entry.result
        if result is None:
            return
        self.done += 1
        self.result_units += write_units(size)
        self.fetch_ms += result.ms
        self.problems += result.outcome in ("failed", "skipped")
        if result.block is not None:
            self.parts.add(result.block.part)
        if result.archive is not None and result.archive.run_id == self.run_id:
            self.archives.add(result.archive.file)

    def as_plain(self) -> dict[str, Any]:
        """For a shard's result: numbers as they are; parts and archives by a 16-hex digest of their name
        (what the estimate needs of them is how many distinct ones the run has)."""
        plain: dict[str, Any] = {
            k: getattr(self, k) for k in ("entries", "done", "links", "problems", "item_bytes", "result_units")
        }
        plain["fetch_ms"] = self.fetch_ms
        plain["parts"] = sorted(_name_digest(p) for p in self.parts)
        plain["archives"] = sorted(_name_digest(a) for a in self.archives)
        return plain

    def merge(self, plain: Mapping[str, Any]) -> None:
        """Add another shard's :meth:`as_plain` (a part two shards' pages share is counted once)."""
        for name in ("entries", "done", "links", "problems", "item_bytes", "result_units", "fetch_ms"):
            setattr(self, name, getattr(self, name) + int(plain[name]))
        self.parts.update(plain["parts"])
        self.archives.update(plain["archives"])

    def usage(
        self,
        tuning: Tuning,
        output: OutputSummary,
        *,
        seeds: int,
        concurrency: int,
        catalog: bool,
        finalize_s: float,
        shards: int = 1,
    ) -> tuple[RunUsage, RunUsage]:
        """(what grows with the run's pages, what any run costs once)."""
        per_batch = tuning.urls_per_message * tuning.batch_size
        batches = max(1, math.ceil(self.done / per_batch))
        messages = math.ceil(seeds / tuning.urls_per_message) + math.ceil(self.links / tuning.urls_per_message)
        # Each batch: its URLs looked up (eventually consistent, half a unit each), the run read twice,
        # the progress shards read once; the finalizer scans the URLs twice, the scheduler its catalog twice,
        # and the finalizer the catalog once more (records gone).
        reads = 0.5 * (self.done + self.links) + batches * (2 + PROGRESS_SHARDS / 2)
        reads += 2 * read_units(self.item_bytes, consistent=True)
        if catalog:
            reads += 3 * read_units(self.item_bytes, consistent=False)
        output_puts = sum(_upload_requests(int(str(f["bytes"]))) for f in output.files)
        spans = math.ceil(output.bytes / max(1, tuning.output_span_bytes))
        fetcher_s = self.fetch_ms / 1000 / max(1, concurrency)
        variable = RunUsage(
            write_units=self.result_units + self.links + batches,
            read_units=reads,
            s3_puts=len(self.parts) + len(self.archives) + output_puts,
            s3_gets=len(self.parts) + spans + (min(batches, 20) if self.links else 0),
            sqs_requests=3 * math.ceil(messages / 10),
            lambda_gb_s=fetcher_s * tuning.fetcher_memory_mb / 1024,
            lambda_requests=batches,
            log_bytes=batches * LOG_BYTES_PER_BATCH + self.problems * LOG_BYTES_PER_PROBLEM,
        )
        fixed = RunUsage(
            write_units=8,  # the run item and the lock, a handful of times
            read_units=4,
            # the seed set, page index, manifest, summary; per finalize shard its six result objects
            s3_puts=4 + SHARD_PUTS * shards,
            s3_gets=1 + shard_gets(shards),
            sqs_requests=0,
            lambda_gb_s=(finalize_s + SCHEDULER_S) * tuning.finalizer_memory_mb / 1024,
            lambda_requests=2,
            log_bytes=2 * LOG_BYTES_PER_BATCH,
        )
        return variable, fixed


def _name_digest(name: str) -> str:
    return hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


SHARD_PUTS = 6
"""Per finalize shard: scan (2 objects), keys (2), write (2)."""


def shard_gets(shards: int) -> int:
    """The finalize shards' reads of each other's results: each key task its row of ``keys.index`` and a range
    of every scan object; each write task its row of ``plan.index``, ``write.index``, its plan's range of every
    scan object and at most one range of every keys object; the combine 3 results and the index rows a shard."""
    return shards * (1 + shards) + shards * (2 + 2 * shards) + 4 * shards


def _upload_requests(size: int) -> int:
    """One PUT under a multipart part's size; else create, one request per part, complete."""
    return 1 if size < PART_BYTES else math.ceil(size / PART_BYTES) + 2

"""A run's summary: what it counted, what it wrote, how it was judged and what it cost, as one frozen value.

The finalizer builds it (``sluice.pipeline.finalize.summary``), ``summary.json`` stores it, and
every reader (the finalizer's answer, the metrics, ``sluice run --json``, ``show``, ``runs``,
``report``, ``reextract``) reads it through :meth:`RunSummary.from_json`, by attribute. This
module is the one place its JSON keys are spelled: :meth:`RunSummary.to_json` writes them, and
:meth:`RunSummary.from_json` reads them back, including the summaries older versions wrote
(missing sections take their empty value; ``records.carried_missing`` is read as ``reused_missing``).

A few sections are other modules' own reports, kept as they were written: the sitemaps' report
(``sluice.pipeline.start.sitemapseeds``) and the price list's usage lines (``sluice.domain.cost``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.domain.summary_counts import (
    BlockedHostSummary,
    JsonObject,
    Limit,
    Limits,
    NotDueBy,
    PageCounts,
    PreviousRun,
    RecordCounts,
    TypeSummary,
    float_map,
    float_or_none,
    int_map,
    int_or_none,
)
from sluice.domain.summary_sections import (
    Alert,
    BeforeReextraction,
    CheckResult,
    Cost,
    Egress,
    MissingArchive,
    OutputFile,
    Outputs,
    ProxySummary,
    Reextraction,
    SitemapsRead,
    VerdictSummary,
)

__all__ = [
    "FAILED",
    "Alert",
    "BeforeReextraction",
    "BlockedHostSummary",
    "CheckResult",
    "Cost",
    "Egress",
    "Limit",
    "Limits",
    "MissingArchive",
    "NotDueBy",
    "OutputFile",
    "Outputs",
    "PageCounts",
    "PreviousRun",
    "ProxySummary",
    "RecordCounts",
    "Reextraction",
    "RunSummary",
    "SitemapsRead",
    "TypeSummary",
    "VerdictSummary",
]


FAILED = "failed"
"""The status of a run that ended failed (finalizing could not complete): its summary says why, and little else."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Everything ``summary.json`` says about one run (see docs/operations.md for each section)."""

    crawl: str
    run_id: str
    status: str
    """``finished``, ``unfinished`` (pages pending at its deadline, or stopped early) or ``failed``."""
    started_at: str
    finalized_at: str | None
    spec_digest: str | None
    catalog_run: str | None
    pages: PageCounts
    verdict: VerdictSummary
    records: RecordCounts | None = None
    """None only for a run that ended failed."""
    limits: Limits | None = None
    failures: Mapping[str, int] = field(default_factory=dict)
    """Failure reasons and their pages, the 20 commonest (the rest under ``(other)``)."""
    skips: Mapping[str, int] = field(default_factory=dict)
    blocked_hosts: Mapping[str, BlockedHostSummary] = field(default_factory=dict)
    rejected: Mapping[str, int] = field(default_factory=dict)
    null_rates: Mapping[str, float] = field(default_factory=dict)
    previous_run: PreviousRun | None = None
    outputs: Outputs | None = None
    types: Mapping[str, TypeSummary] | None = None
    """Per page type, for a spec with ``types``."""
    stopped: str | None = None
    """Why a run was stopped before it drained."""
    failed: str | None = None
    """Why a run ended failed."""
    egress: Egress | None = None
    proxies: Mapping[str, ProxySummary] | None = None
    sitemaps: SitemapsRead | None = None
    """None: the crawl is not seeded from sitemaps."""
    finalize_s: float | None = None
    finalize_shards: int | None = None
    cost: Cost | None = None
    reextracted: Reextraction | None = None

    @property
    def healthy(self) -> bool:
        return self.verdict.healthy

    @property
    def records_total(self) -> int:
        return self.records.total if self.records is not None else 0

    def to_json(self) -> JsonObject:
        """The summary as ``summary.json`` holds it (and ``sluice run --json`` prints it)."""
        plain: JsonObject = {
            "crawl": self.crawl,
            "run_id": self.run_id,
            "status": self.status,
            "started_at": self.started_at,
            "finalized_at": self.finalized_at,
            "spec_digest": self.spec_digest,
            "catalog_run": self.catalog_run,
            # a run that ended failed was never counted: its pages say only its seeds
            "pages": {"seeds": self.pages.seeds} if self.status == FAILED else self.pages.to_json(),
            "verdict": self.verdict.to_json(),
        }
        if self.status != FAILED:
            plain |= {
                "failures": dict(self.failures),
                "skips": dict(self.skips),
                "blocked_hosts": {
                    h: {"reason": b.reason, "urls_skipped": b.urls_skipped} for h, b in self.blocked_hosts.items()
                },
                "rejected": dict(self.rejected),
                "null_rates": dict(self.null_rates),
                "previous_run": (
                    {"run_id": self.previous_run.run_id, "records": self.previous_run.records}
                    if self.previous_run is not None
                    else None
                ),
            }
        optional: dict[str, Any] = {
            "records": self.records.to_json() if self.records is not None else None,
            "limits": self.limits.to_json() if self.limits is not None else None,
            "outputs": self.outputs.to_json() if self.outputs is not None else None,
            "types": {k: t.to_json() for k, t in self.types.items()} if self.types is not None else None,
            "stopped": self.stopped,
            "failed": self.failed,
            "egress": self.egress.to_json() if self.egress is not None else None,
            "proxies": (
                {
                    n: {
                        "tier": p.tier,
                        "pages": p.pages,
                        "failures": p.failures,
                        "ejected": p.ejected,
                        "reason": p.reason,
                    }
                    for n, p in self.proxies.items()
                }
                if self.proxies
                else None
            ),
            "finalize_s": self.finalize_s,
            "finalize_shards": self.finalize_shards,
            "cost": self.cost.to_json() if self.cost is not None else None,
            "reextracted": self.reextracted.to_json() if self.reextracted is not None else None,
        }
        plain |= {k: v for k, v in optional.items() if v is not None}
        if self.sitemaps is not None:
            plain["sitemaps"] = dict(self.sitemaps.report) if self.sitemaps.report is not None else None
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> RunSummary:
        """A stored summary, of this version or an older one (sections it lacks take their empty value)."""
        previous, types, proxies = plain.get("previous_run"), plain.get("types"), plain.get("proxies")
        return cls(
            crawl=str(plain["crawl"]),
            run_id=str(plain["run_id"]),
            status=str(plain.get("status", "finished")),
            started_at=str(plain.get("started_at", "")),
            finalized_at=plain.get("finalized_at"),
            spec_digest=plain.get("spec_digest"),
            catalog_run=plain.get("catalog_run"),
            pages=PageCounts.from_json(plain.get("pages") or {}),
            verdict=VerdictSummary.from_json(plain.get("verdict") or {}),
            records=RecordCounts.from_json(plain["records"]) if plain.get("records") is not None else None,
            limits=Limits.from_json(plain["limits"]) if plain.get("limits") else None,
            failures=int_map(plain.get("failures")),
            skips=int_map(plain.get("skips")),
            blocked_hosts={
                h: BlockedHostSummary(str(b["reason"]), int(b["urls_skipped"]))
                for h, b in (plain.get("blocked_hosts") or {}).items()
            },
            rejected=int_map(plain.get("rejected")),
            null_rates=float_map(plain.get("null_rates")),
            previous_run=PreviousRun(str(previous["run_id"]), int_or_none(previous.get("records")))
            if previous
            else None,
            outputs=Outputs.from_json(plain["outputs"]) if plain.get("outputs") else None,
            types={k: TypeSummary.from_json(t) for k, t in types.items()} if types is not None else None,
            stopped=plain.get("stopped"),
            failed=plain.get("failed"),
            egress=Egress.from_json(plain["egress"]) if plain.get("egress") else None,
            proxies={
                n: ProxySummary(int(p["tier"]), int(p["pages"]), int(p["failures"]), bool(p["ejected"]), p["reason"])
                for n, p in proxies.items()
            }
            if proxies
            else None,
            sitemaps=SitemapsRead(plain["sitemaps"]) if "sitemaps" in plain else None,
            finalize_s=float_or_none(plain.get("finalize_s")),
            finalize_shards=int_or_none(plain.get("finalize_shards")),
            cost=Cost.from_json(plain["cost"]) if plain.get("cost") else None,
            reextracted=Reextraction.from_json(plain["reextracted"]) if plain.get("reextracted") else None,
        )

    def to_bytes(self) -> bytes:
        """``summary.json``'s bytes: keys sorted, indented for people."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RunSummary:
        return cls.from_json(json.loads(data))

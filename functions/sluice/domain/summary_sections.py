"""A run summary's other sections: its verdict, its output files, its route and proxies, its cost, its sitemaps
and its re-extraction.

Part of :class:`~sluice.domain.summary.RunSummary`; each part writes and reads its own JSON keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.domain.summary_counts import JsonObject, RecordCounts, float_map, float_or_none, int_map


@dataclass(frozen=True, slots=True)
class Alert:
    """A check that failed: what it measured against what it allows."""

    check: str
    message: str
    value: float | None = None
    threshold: float | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    ok: bool
    message: str


@dataclass(frozen=True, slots=True)
class VerdictSummary:
    """The verdict as stored: healthy only if every check passed; the failed ones again as alerts."""

    healthy: bool
    record_count_ratio: float | None = None
    error_rate: float | None = None
    """None for a run that ended failed (it was never counted)."""
    alerts: tuple[Alert, ...] = ()
    checks: tuple[CheckResult, ...] = ()

    def to_json(self) -> JsonObject:
        return {
            "healthy": self.healthy,
            "record_count_ratio": self.record_count_ratio,
            "error_rate": self.error_rate,
            "alerts": [
                {"check": a.check, "message": a.message, "value": a.value, "threshold": a.threshold}
                for a in self.alerts
            ],
            "checks": [{"check": c.check, "ok": c.ok, "message": c.message} for c in self.checks],
        }

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> VerdictSummary:
        return cls(
            healthy=bool(plain.get("healthy", False)),
            record_count_ratio=float_or_none(plain.get("record_count_ratio")),
            error_rate=float_or_none(plain.get("error_rate")),
            alerts=tuple(
                Alert(
                    str(a["check"]),
                    str(a["message"]),
                    float_or_none(a.get("value")),
                    float_or_none(a.get("threshold")),
                )
                for a in plain.get("alerts") or ()
            ),
            checks=tuple(
                CheckResult(str(c["check"]), bool(c["ok"]), str(c.get("message", "")))
                for c in plain.get("checks") or ()
            ),
        )


@dataclass(frozen=True, slots=True)
class OutputFile:
    key: str
    records: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Outputs:
    """Where the run's records are: the folder, each file, and their size."""

    records: str
    files: tuple[OutputFile, ...] = ()
    bytes: int = 0

    def to_json(self) -> JsonObject:
        return {
            "records": self.records,
            "files": [{"key": f.key, "records": f.records, "bytes": f.bytes} for f in self.files],
            "bytes": self.bytes,
        }

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> Outputs:
        files = tuple(
            OutputFile(str(f["key"]), int(f.get("records", 0)), int(f.get("bytes", 0))) for f in plain.get("files", ())
        )
        return cls(str(plain.get("records", "")), files, int(plain.get("bytes", 0)))


@dataclass(frozen=True, slots=True)
class Egress:
    """The route the run's requests took: ``direct``, ``fixed`` (the stack's addresses) or ``proxies`` by tier."""

    route: str
    addresses: tuple[str, ...] | None = None
    """``fixed``: the stack's addresses."""
    pages_by_tier: Mapping[str, int] | None = None
    """``proxies``: pages each tier carried."""
    via: tuple[str, ...] | None = None
    """``proxies`` behind the stack's fixed addresses: those addresses."""

    def to_json(self) -> JsonObject:
        plain: JsonObject = {"route": self.route}
        if self.addresses is not None:
            plain["addresses"] = list(self.addresses)
        if self.pages_by_tier is not None:
            plain["pages_by_tier"] = dict(self.pages_by_tier)
        if self.via is not None:
            plain["via"] = list(self.via)
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> Egress:
        addresses, tiers, via = plain.get("addresses"), plain.get("pages_by_tier"), plain.get("via")
        return cls(
            route=str(plain.get("route", "direct")),
            addresses=tuple(addresses) if addresses is not None else None,
            pages_by_tier=int_map(tiers) if tiers is not None else None,
            via=tuple(via) if via is not None else None,
        )


@dataclass(frozen=True, slots=True)
class ProxySummary:
    """One proxy of the pool over the run."""

    tier: int = 0
    pages: int = 0
    failures: int = 0
    ejected: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Cost:
    """The run's estimated AWS cost at list prices: what grows with pages, and what any run costs once."""

    estimated_usd: float
    per_million_pages_usd: float
    fixed_per_run_usd: float
    lines_usd: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    """The counts priced (``per_page_work``, ``per_run``), as ``sluice.domain.cost.RunUsage`` writes them."""
    prices: str = ""

    def to_json(self) -> JsonObject:
        return {
            "estimated_usd": self.estimated_usd,
            "per_million_pages_usd": self.per_million_pages_usd,
            "fixed_per_run_usd": self.fixed_per_run_usd,
            "lines_usd": dict(self.lines_usd),
            "usage": dict(self.usage),
            "prices": self.prices,
        }

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> Cost:
        return cls(
            estimated_usd=float(plain.get("estimated_usd", 0.0)),
            per_million_pages_usd=float(plain.get("per_million_pages_usd", 0.0)),
            fixed_per_run_usd=float(plain.get("fixed_per_run_usd", 0.0)),
            lines_usd=float_map(plain.get("lines_usd")),
            usage=dict(plain.get("usage") or {}),
            prices=str(plain.get("prices", "")),
        )


@dataclass(frozen=True, slots=True)
class SitemapsRead:
    """A crawl seeded from sitemaps: what reading them found, as the start's report says (None: never read)."""

    report: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class MissingArchive:
    url: str
    reason: str


@dataclass(frozen=True, slots=True)
class BeforeReextraction:
    """What a re-extracted run said when it ran (its alerts stay in its history)."""

    verdict: VerdictSummary | None = None
    records: RecordCounts | None = None
    null_rates: Mapping[str, float] | None = None

    def to_json(self) -> JsonObject:
        plain: JsonObject = {}
        if self.verdict is not None:
            plain["verdict"] = self.verdict.to_json()
        if self.records is not None:
            plain["records"] = self.records.to_json()
        if self.null_rates is not None:
            plain["null_rates"] = dict(self.null_rates)
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> BeforeReextraction:
        return cls(
            verdict=VerdictSummary.from_json(plain["verdict"]) if "verdict" in plain else None,
            records=RecordCounts.from_json(plain["records"]) if "records" in plain else None,
            null_rates=float_map(plain["null_rates"]) if "null_rates" in plain else None,
        )


@dataclass(frozen=True, slots=True)
class Reextraction:
    """``sluice reextract`` rebuilt the run's records from its archive: when, with which spec, what it found."""

    at: str
    spec_digest: str
    previous_spec_digest: str | None = None
    pages: int = 0
    records: int = 0
    from_runs: tuple[str, ...] = ()
    missing_archive: int = 0
    missing_named: tuple[MissingArchive, ...] = ()
    refused: int = 0
    records_lost: int = 0
    links_followed: bool = False
    seconds: float = 0.0
    before: BeforeReextraction | None = None

    def to_json(self) -> JsonObject:
        plain: JsonObject = {
            "at": self.at,
            "spec_digest": self.spec_digest,
            "previous_spec_digest": self.previous_spec_digest,
            "pages": self.pages,
            "records": self.records,
            "from_runs": list(self.from_runs),
            "missing_archive": self.missing_archive,
            "missing_named": [{"url": m.url, "reason": m.reason} for m in self.missing_named],
            "refused": self.refused,
            "records_lost": self.records_lost,
            "links_followed": self.links_followed,
            "seconds": self.seconds,
        }
        if self.before is not None:
            plain["before"] = self.before.to_json()
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> Reextraction:
        before = plain.get("before")
        return cls(
            at=str(plain.get("at", "")),
            spec_digest=str(plain.get("spec_digest", "")),
            previous_spec_digest=plain.get("previous_spec_digest"),
            pages=int(plain.get("pages", 0)),
            records=int(plain.get("records", 0)),
            from_runs=tuple(str(r) for r in plain.get("from_runs", ())),
            missing_archive=int(plain.get("missing_archive", 0)),
            missing_named=tuple(
                MissingArchive(str(m["url"]), str(m["reason"])) for m in plain.get("missing_named", ())
            ),
            refused=int(plain.get("refused", 0)),
            records_lost=int(plain.get("records_lost", 0)),
            links_followed=bool(plain.get("links_followed", False)),
            seconds=float(plain.get("seconds", 0.0)),
            before=BeforeReextraction.from_json(before) if before else None,
        )

"""A run summary's counts: its pages by outcome, the limits that cut it, its records, each page type's share.

Part of :class:`~sluice.domain.summary.RunSummary`; each part writes and reads its own JSON keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


def int_map(plain: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in (plain or {}).items()}


def float_map(plain: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in (plain or {}).items()}


def int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class NotDueBy:
    """Pages not due, by what said so (a crawl with a recrawl schedule)."""

    sitemap: int = 0
    schedule: int = 0


@dataclass(frozen=True, slots=True)
class PageCounts:
    """The run's pages by outcome."""

    seeds: int = 0
    enqueued: int = 0
    links: int = 0
    fetched: int = 0
    not_modified: int = 0
    not_due: int = 0
    """Pages not requested: a sitemap's lastmod or the recrawl schedule said they had not changed."""
    failed: int = 0
    gone: int = 0
    skipped: int = 0
    pending: int = 0
    links_dropped: int = 0
    carry_stale: int | None = None
    """A spec with types only: pages that kept the catalog run's carried data."""
    not_due_by: NotDueBy | None = None
    """A spec with a recrawl schedule only."""

    def to_json(self) -> JsonObject:
        plain: JsonObject = {
            "seeds": self.seeds,
            "enqueued": self.enqueued,
            "links": self.links,
            "fetched": self.fetched,
            "not_modified": self.not_modified,
            "not_due": self.not_due,
            "failed": self.failed,
            "gone": self.gone,
            "skipped": self.skipped,
            "pending": self.pending,
            "links_dropped": self.links_dropped,
        }
        if self.carry_stale is not None:
            plain["carry_stale"] = self.carry_stale
        if self.not_due_by is not None:
            plain["not_due_by"] = {"sitemap": self.not_due_by.sitemap, "schedule": self.not_due_by.schedule}
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> PageCounts:
        by = plain.get("not_due_by")
        return cls(
            seeds=int(plain.get("seeds", 0)),
            enqueued=int(plain.get("enqueued", 0)),
            links=int(plain.get("links", 0)),
            fetched=int(plain.get("fetched", 0)),
            not_modified=int(plain.get("not_modified", 0)),
            not_due=int(plain.get("not_due", 0)),
            failed=int(plain.get("failed", 0)),
            gone=int(plain.get("gone", 0)),
            skipped=int(plain.get("skipped", 0)),
            pending=int(plain.get("pending", 0)),
            links_dropped=int(plain.get("links_dropped", 0)),
            carry_stale=int_or_none(plain.get("carry_stale")),
            not_due_by=NotDueBy(int(by["sitemap"]), int(by["schedule"])) if by else None,
        )


@dataclass(frozen=True, slots=True)
class Limit:
    """A ``follow`` limit and the links the run left because of it."""

    limit: int | None
    links_left: int


@dataclass(frozen=True, slots=True)
class Limits:
    max_pages: Limit
    max_depth: Limit

    def to_json(self) -> JsonObject:
        return {
            name: {"limit": limit.limit, "links_left": limit.links_left}
            for name, limit in (("max_pages", self.max_pages), ("max_depth", self.max_depth))
        }

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> Limits:
        def limit(name: str) -> Limit:
            part = plain.get(name) or {}
            return Limit(int_or_none(part.get("limit")), int(part.get("links_left", 0)))

        return cls(limit("max_pages"), limit("max_depth"))


@dataclass(frozen=True, slots=True)
class RecordCounts:
    """The run's records: as its pages counted them, and as its output holds them (each key once)."""

    total: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    in_output: int = 0
    duplicates_dropped: int = 0
    reused_missing: int = 0
    """Pages reused from the catalog run whose records its output did not have (0 unless it was altered).
    Summaries before the rename call it ``carried_missing``."""
    fallback_keys: int = 0
    gone: int | None = None
    """Records of the catalog run's output this run's lacks (None: no catalog run)."""
    in_catalog_run: int | None = None
    by_type: Mapping[str, int] | None = None
    """Records in the output per page type (a spec with types that wrote some)."""
    carry_dropped: Mapping[str, int] | None = None
    """A spec with types only: carried fields left out of links' data, by field."""

    def to_json(self) -> JsonObject:
        plain: JsonObject = {
            "total": self.total,
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "in_output": self.in_output,
            "duplicates_dropped": self.duplicates_dropped,
            "reused_missing": self.reused_missing,
            "fallback_keys": self.fallback_keys,
            "gone": self.gone,
            "in_catalog_run": self.in_catalog_run,
        }
        if self.by_type:
            plain["by_type"] = dict(self.by_type)
        if self.carry_dropped is not None:
            plain["carry_dropped"] = dict(self.carry_dropped)
        return plain

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> RecordCounts:
        return cls(
            total=int(plain.get("total", 0)),
            new=int(plain.get("new", 0)),
            changed=int(plain.get("changed", 0)),
            unchanged=int(plain.get("unchanged", 0)),
            in_output=int(plain.get("in_output", plain.get("total", 0))),
            duplicates_dropped=int(plain.get("duplicates_dropped", 0)),
            reused_missing=int(plain.get("reused_missing", plain.get("carried_missing", 0))),
            fallback_keys=int(plain.get("fallback_keys", 0)),
            gone=int_or_none(plain.get("gone")),
            in_catalog_run=int_or_none(plain.get("in_catalog_run")),
            by_type=int_map(plain["by_type"]) if plain.get("by_type") else None,
            carry_dropped=int_map(plain["carry_dropped"]) if "carry_dropped" in plain else None,
        )


@dataclass(frozen=True, slots=True)
class BlockedHostSummary:
    reason: str
    """The breaker's own words: which refusals, on how many of how many answers."""
    urls_skipped: int


@dataclass(frozen=True, slots=True)
class PreviousRun:
    """The run this one was compared with: the crawl's latest finished run before it."""

    run_id: str
    records: int | None


@dataclass(frozen=True, slots=True)
class TypeSummary:
    """One page type's share of the run (a spec with ``types``), against the previous run's."""

    pages: int = 0
    failed: int = 0
    records: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    items: int = 0
    null_rates: Mapping[str, float] = field(default_factory=dict)
    previous_records: int | None = None
    record_count_ratio: float | None = None
    carry_stale: int = 0
    carry_dropped: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {
            "pages": self.pages,
            "failed": self.failed,
            "records": self.records,
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "items": self.items,
            "null_rates": dict(self.null_rates),
            "previous_records": self.previous_records,
            "record_count_ratio": self.record_count_ratio,
            "carry_stale": self.carry_stale,
            "carry_dropped": dict(self.carry_dropped),
        }

    @classmethod
    def from_json(cls, plain: Mapping[str, Any]) -> TypeSummary:
        return cls(
            pages=int(plain.get("pages", 0)),
            failed=int(plain.get("failed", 0)),
            records=int(plain.get("records", 0)),
            new=int(plain.get("new", 0)),
            changed=int(plain.get("changed", 0)),
            unchanged=int(plain.get("unchanged", 0)),
            items=int(plain.get("items", 0)),
            null_rates=float_map(plain.get("null_rates")),
            previous_records=int_or_none(plain.get("previous_records")),
            record_count_ratio=float_or_none(plain.get("record_count_ratio")),
            carry_stale=int(plain.get("carry_stale", 0)),
            carry_dropped=int_map(plain.get("carry_dropped")),
        )

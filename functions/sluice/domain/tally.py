"""A run's exact counts, derived from its URLs' results rather than kept on a shared item.

Counting happens once, at finalization, over every URL of the run; nothing on the per-page path
adds to a counter every page touches. Maps keyed by something a site controls (failure and skip
reasons) keep their commonest keys and fold the rest into ``(other)``, so a summary stays small
whatever the site answers.

A run is counted in finalize shards, each over its own URLs; :func:`merge` adds one shard's
tally to another's field by field (numbers add, counters add, maps merge), so a field added to a
tally later is combined without a line here, and :func:`to_plain` / :func:`from_plain` carry a
tally in a shard's result object.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from sluice.domain.egress import POOL_EMPTY, ProxyTally
from sluice.domain.hosts import blocked_host
from sluice.domain.pages import BY_SCHEDULE, PageResult, UrlEntry
from sluice.domain.runs import pending
from sluice.domain.verdict import RunCounts, TypeCounts

OTHER = "(other)"


@dataclass
class BoundedCounter:
    """Counts by key, holding at most ``limit`` distinct keys; later new keys count under ``(other)``."""

    limit: int = 200
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, key: str, n: int = 1) -> None:
        if key in self.counts or len(self.counts) < self.limit:
            self.counts[key] += n
        else:
            self.counts[OTHER] += n

    def update(self, mapping: Mapping[str, int]) -> None:
        for key, n in mapping.items():
            if n:
                self.add(key, n)

    def top(self, n: int = 20) -> dict[str, int]:
        """The ``n`` commonest keys, most common first, the rest summed under ``(other)``."""
        ranked = sorted(((k, v) for k, v in self.counts.items() if k != OTHER), key=lambda kv: (-kv[1], kv[0]))
        shown = dict(ranked[:n])
        rest = sum(v for _, v in ranked[n:]) + self.counts.get(OTHER, 0)
        if rest:
            shown[OTHER] = rest
        return shown


MAX_BLOCKED_HOSTS = 50
"""Blocked hosts a summary names (a broad crawl that meets more has a bigger problem than the list)."""


@dataclass(slots=True)
class BlockedHost:
    reason: str
    """The breaker's own words: which refusals, on how many of how many answers."""
    skipped: int
    """The host's URLs the run skipped since."""


MAX_TYPES = 20
"""Page types a spec names at most (``CrawlSpec.types``): a tally per type stays small."""


def _add_records(tally: TypeTally | RunTally, result: PageResult) -> None:
    """A page's records (new, changed, unchanged), its items and its missing fields, and what it carried or could
    not, in a run's or a type's tally."""
    tally.records_new += result.counts.new
    tally.records_changed += result.counts.changed
    tally.records_unchanged += result.counts.unchanged
    tally.items += result.items
    tally.missing.update(result.missing)
    tally.carry_stale += result.carry_stale
    tally.carry_dropped.update(result.carry_dropped)


@dataclass
class TypeTally:
    """One page type's share of a run (a spec with ``types``): its pages, records and missing fields."""

    pages: int = 0
    failed: int = 0
    records_new: int = 0
    records_changed: int = 0
    records_unchanged: int = 0
    items: int = 0
    missing: BoundedCounter = field(default_factory=BoundedCounter)
    carry_stale: int = 0
    """Pages of the type that kept the catalog's carried data: their linking page could not give this run's."""
    carry_dropped: Counter[str] = field(default_factory=Counter)
    """Carried fields the type's pages left out of their links' data (over a task's bound), by field."""

    def add(self, result: PageResult) -> None:
        self.pages += 1
        self.failed += result.outcome == "failed"
        _add_records(self, result)

    def counts(self, records_in_output: int) -> TypeCounts:
        return TypeCounts(
            records=records_in_output,
            items=self.items,
            missing=dict(self.missing.counts),
            carry_stale=self.carry_stale,
            carry_dropped=dict(self.carry_dropped),
        )


@dataclass
class RunTally:
    """Everything a run's verdict and summary count, from one pass over its URLs."""

    seeds: int = 0
    """Seed URLs the run's frontier holds (from the run); a seed has no entry until it is done."""
    seeds_done: int = 0
    links: int = 0
    links_done: int = 0
    fetched: int = 0
    not_modified: int = 0
    not_due: int = 0
    """Pages not requested, their records reused: a sitemap said they had not changed since their last successful
    fetch, or their recrawl interval had not run out..."""
    not_due_scheduled: int = 0
    """...of which the recrawl schedule's (the rest are the sitemaps')."""
    failed: int = 0
    skipped: int = 0
    gone: int = 0
    records_new: int = 0
    records_changed: int = 0
    records_unchanged: int = 0
    items: int = 0
    dropped_links: int = 0
    fallback_keys: int = 0
    capped_links: int = 0
    beyond_depth: int = 0
    carry_stale: int = 0
    """Pages seeded with carried data whose linking page could not give this run's: they keep the catalog's."""
    carry_dropped: Counter[str] = field(default_factory=Counter)
    """Carried fields left out of links' data because a link's data was over a task's bound, by field."""
    missing: BoundedCounter = field(default_factory=BoundedCounter)
    rejected: BoundedCounter = field(default_factory=BoundedCounter)
    failures: BoundedCounter = field(default_factory=BoundedCounter)
    skips: BoundedCounter = field(default_factory=BoundedCounter)
    blocked: dict[str, BlockedHost] = field(default_factory=dict)
    """Hosts the breaker paused for the run, by host (at most :data:`MAX_BLOCKED_HOSTS`)."""
    entries: int = 0
    types: dict[str, TypeTally] = field(default_factory=dict)
    """Per page type, for a spec with ``types`` (pages no type takes are counted in the run's totals only)."""
    proxies: dict[str, ProxyTally] = field(default_factory=dict)
    """Per proxy of the pool (``request.proxies``): pages carried, requests failed, ejection."""
    pool_empty: int = 0
    """Pages that failed because no proxy of the pool was left (:data:`~sluice.domain.egress.POOL_EMPTY`)."""

    @classmethod
    def of(cls, seeds: int, entries: Iterable[UrlEntry]) -> RunTally:
        tally = cls(seeds=seeds)
        for entry in entries:
            tally.add(entry)
        return tally

    def add(self, entry: UrlEntry) -> None:
        self.entries += 1
        if entry.origin == "link":
            self.links += 1
        result = entry.result
        if result is None:
            return
        if entry.origin == "seed":
            self.seeds_done += 1
        else:
            self.links_done += 1
        match result.outcome:
            case "fetched":
                self.fetched += 1
            case "not_modified":
                self.not_modified += 1
            case "not_due":
                self.not_due += 1
                self.not_due_scheduled += result.reason == BY_SCHEDULE
            case "failed":
                self.failed += 1
                self.pool_empty += result.reason == POOL_EMPTY
                self.gone += result.gone
                self.failures.add(result.reason or "unknown")
            case "skipped":
                self.skipped += 1
                self.skips.add(result.reason or "unknown")
                self._count_blocked(result.reason)
        _add_records(self, result)
        self.dropped_links += result.dropped_links
        self.fallback_keys += result.fallback_keys
        self.capped_links += result.capped_links
        self.beyond_depth += result.beyond_depth
        self.rejected.update(result.rejected)
        if result.type is not None and (result.type in self.types or len(self.types) < MAX_TYPES):
            self.types.setdefault(result.type, TypeTally()).add(result)
        if result.proxy is not None or result.proxy_failures:
            self._count_proxies(result)

    def _count_proxies(self, result: PageResult) -> None:
        """The page's proxy and the proxies that failed it (a pool holds at most 32: no bound needed)."""
        if result.proxy is not None:
            carried = self.proxies.setdefault(result.proxy, ProxyTally())
            carried.pages += 1
            carried.tier = result.proxy_tier or 0
        for name, reason, ejected in result.proxy_failures:
            proxy = self.proxies.setdefault(name, ProxyTally())
            proxy.failures += 1
            if ejected and not proxy.ejected:
                proxy.ejected, proxy.reason = True, reason
            elif not proxy.ejected:
                proxy.reason = reason

    def _count_blocked(self, reason: str | None) -> None:
        host = blocked_host(reason)
        if host is None:
            return
        known = self.blocked.get(host)
        if known is not None:
            known.skipped += 1
        elif len(self.blocked) < MAX_BLOCKED_HOSTS:
            self.blocked[host] = BlockedHost(str(reason), 1)

    @property
    def enqueued(self) -> int:
        return self.seeds + self.links

    @property
    def done(self) -> int:
        return self.seeds_done + self.links_done

    @property
    def pending(self) -> int:
        return pending(self.seeds, self.links, self.done)

    @property
    def drained(self) -> bool:
        """Every seed has its result and every claimed link has its result."""
        return self.seeds_done >= self.seeds and self.links_done == self.links

    @property
    def records(self) -> int:
        """Records counted page by page (a record on two pages counts on each; the output holds it once)."""
        return self.records_new + self.records_changed + self.records_unchanged

    def counts(
        self,
        records_in_output: int,
        gone: tuple[int, int] | None = None,
        records_by_type: Mapping[str, int] | None = None,
    ) -> RunCounts:
        """What the verdict judges: the output's record count, the pages' outcomes, and ``(previous, gone)``
        records against the catalog run when there is one; per page type, the output's records of each."""
        by_type = records_by_type or {}
        kinds = sorted({*self.types, *by_type})
        return RunCounts(
            by_type={k: self.types.get(k, TypeTally()).counts(by_type.get(k, 0)) for k in kinds},
            fetched=self.fetched,
            not_modified=self.not_modified,
            not_due=self.not_due,
            failed=self.failed,
            skipped=self.skipped,
            records=records_in_output,
            items=self.items,
            missing=dict(self.missing.counts),
            capped_links=self.capped_links,
            beyond_depth=self.beyond_depth,
            carry_stale=self.carry_stale,
            carry_dropped=dict(self.carry_dropped),
            records_before=gone[0] if gone is not None else None,
            records_gone=gone[1] if gone is not None else None,
            blocked={h: (b.reason, b.skipped) for h, b in self.blocked.items()},
            proxy_pool_empty=self.pool_empty,
            proxies_ejected={n: p.reason or "" for n, p in self.proxies.items() if p.ejected},
        )


def merge(into: Any, other: Any) -> None:
    """Add ``other`` (a tally of another shard's URLs) to ``into``, field by field, in shard order.

    Numbers add; a :class:`BoundedCounter` adds its counts (its limit still holds); a map of tallies
    merges key by key (a key new to ``into`` is taken while the map has room, as :meth:`RunTally.add`
    takes it); :class:`BlockedHost` keeps the first shard's reason and adds the URLs skipped; a
    :class:`~collections.Counter` adds its counts; a :class:`ProxyTally` as :meth:`RunTally.add` would
    have left it had it counted the other shard's pages after this one's."""
    if isinstance(into, ProxyTally):
        _merge_proxy(into, other)
        return
    for spec in fields(into):
        mine, theirs = getattr(into, spec.name), getattr(other, spec.name)
        if isinstance(mine, bool | str):
            continue
        if isinstance(mine, int | float):
            setattr(into, spec.name, mine + theirs)
        elif isinstance(mine, Counter):
            mine.update(theirs)
        elif isinstance(mine, BoundedCounter):
            mine.update(theirs.counts)
        elif isinstance(mine, BlockedHost):
            mine.skipped += theirs.skipped
        elif isinstance(mine, dict):
            room = MAX_BLOCKED_HOSTS if spec.name == "blocked" else MAX_TYPES
            for key, value in theirs.items():
                if key in mine:
                    merge(mine[key], value)
                elif len(mine) < room:
                    mine[key] = value
        else:
            raise TypeError(f"{type(into).__name__}.{spec.name}: no rule to merge a {type(mine).__name__}")


def _merge_proxy(into: ProxyTally, other: ProxyTally) -> None:
    into.pages += other.pages
    into.failures += other.failures
    if other.pages:
        into.tier = other.tier  # the tier of the last page it carried, as add() keeps it
    if other.ejected and not into.ejected:
        into.ejected, into.reason = True, other.reason
    elif not into.ejected and other.reason is not None:
        into.reason = other.reason


def to_plain(tally: Any) -> dict[str, Any]:
    """A tally as JSON-ready values (the inverse of :func:`from_plain`)."""
    plain: dict[str, Any] = {}
    for spec in fields(tally):
        value = getattr(tally, spec.name)
        if isinstance(value, BoundedCounter):
            plain[spec.name] = {"limit": value.limit, "counts": dict(value.counts)}
        elif isinstance(value, Counter):
            plain[spec.name] = dict(value)
        elif isinstance(value, dict):
            plain[spec.name] = {k: to_plain(v) for k, v in value.items()}
        else:
            plain[spec.name] = value
    return plain


def run_tally_from_plain(plain: Mapping[str, Any]) -> RunTally:
    counted: RunTally = _from_plain(RunTally, plain)
    return counted


def _from_plain(kind: type[Any], plain: Mapping[str, Any]) -> Any:
    empty = kind()
    values: dict[str, Any] = {}
    for spec in fields(empty):
        if spec.name not in plain:
            continue
        value, default = plain[spec.name], getattr(empty, spec.name)
        if isinstance(default, BoundedCounter):
            values[spec.name] = BoundedCounter(
                int(value["limit"]), Counter({k: int(n) for k, n in value["counts"].items()})
            )
        elif spec.name == "blocked":
            values[spec.name] = {k: BlockedHost(str(v["reason"]), int(v["skipped"])) for k, v in value.items()}
        elif spec.name == "types":
            values[spec.name] = {k: _from_plain(TypeTally, v) for k, v in value.items()}
        elif spec.name == "proxies":
            values[spec.name] = {k: _from_plain(ProxyTally, v) for k, v in value.items()}
        elif isinstance(default, Counter):
            values[spec.name] = Counter({k: int(n) for k, n in value.items()})
        else:
            values[spec.name] = value
    return kind(**values)

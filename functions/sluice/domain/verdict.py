"""A finished run's verdict: did it finish, did it collect a plausible number of records, did errors rise.

Pure code, so the rule that pages someone at 3 a.m. is tested here rather than trusted to an alarm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sluice.spec import Alerts, Follow
from sluice.spec.models import MAX_CARRY_BYTES


@dataclass(frozen=True, slots=True)
class TypeCounts:
    """One page type's share of a run: its records in the output, the items its pages held, fields missing."""

    records: int = 0
    items: int = 0
    missing: Mapping[str, int] = field(default_factory=dict)
    carry_stale: int = 0
    """The type's pages that kept the catalog's carried data (their linking page could not give this run's)."""
    carry_dropped: Mapping[str, int] = field(default_factory=dict)
    """Carried fields the type's pages left out of their links' data, by field."""

    def null_rates(self) -> dict[str, float]:
        return {name: n / self.items for name, n in sorted(self.missing.items())} if self.items else {}


@dataclass(frozen=True, slots=True)
class RunCounts:
    """What a run did, as the ledger counted it."""

    fetched: int = 0
    not_modified: int = 0
    not_due: int = 0
    """Pages not requested because a sitemap's lastmod or the recrawl schedule said they were not due: their records
    are reused from the catalog run, so they were neither attempted nor failed (``RunTally.not_due``)."""
    failed: int = 0
    skipped: int = 0
    records: int = 0
    items: int = 0
    missing: Mapping[str, int] = field(default_factory=dict)
    capped_links: int = 0
    """New links left out because the run held ``follow.max_pages`` URLs."""
    beyond_depth: int = 0
    """Links of pages at ``follow.max_depth`` the run did not know (an upper bound)."""
    sitemap_left_out: int = 0
    """Sitemap page URLs not seeded: past ``sitemaps.max_urls``, or past the room ``follow.max_pages`` left
    (the summary's ``sitemaps.left_out``)."""
    carry_stale: int = 0
    """Pages seeded with carried data that kept the catalog's: their linking page could not give this run's."""
    carry_dropped: Mapping[str, int] = field(default_factory=dict)
    """Carried fields left out of links' data (over the bytes a task holds), by field."""
    records_before: int | None = None
    """Distinct records of the catalog run's output (None: no catalog run to compare with)."""
    records_gone: int | None = None
    """Of those, the ones this run's output lacks."""
    blocked: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    """Hosts the breaker paused for the run: the breaker's reason and how many of the host's URLs were skipped."""
    by_type: Mapping[str, TypeCounts] = field(default_factory=dict)
    """Per page type of a spec with ``types`` (every type the spec names); empty for a one-type spec."""
    proxy_pool_empty: int = 0
    """Pages that failed because every proxy of the pool (``request.proxies``) was ejected."""
    proxies_ejected: Mapping[str, str] = field(default_factory=dict)
    """Proxies of the pool ejected for the run, and why."""

    @property
    def attempted(self) -> int:
        """Pages we tried to fetch: skipped pages (robots, refused) are not errors, pages not due were not asked for."""
        return self.fetched + self.not_modified + self.failed

    @property
    def error_rate(self) -> float:
        return self.failed / self.attempted if self.attempted else 0.0

    def null_rates(self) -> dict[str, float]:
        return {name: n / self.items for name, n in sorted(self.missing.items())} if self.items else {}


@dataclass(frozen=True, slots=True)
class Check:
    """One question about a run, answered."""

    name: str
    ok: bool
    value: float | None
    threshold: float | None
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """All the checks; healthy only if every one passed."""

    checks: tuple[Check, ...]
    record_count_ratio: float | None
    error_rate: float

    @property
    def healthy(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def alerts(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def judge(
    counts: RunCounts,
    previous_records: int | None,
    alerts: Alerts,
    *,
    finished: bool = True,
    follow: Follow | None = None,
    previous_by_type: Mapping[str, int] | None = None,
) -> Verdict:
    """Judge a run against the spec's alert thresholds and the previous run's record count.

    ``follow`` names the limits in the ``truncated`` check's message. A run of a spec with ``types`` is
    judged per type too (``previous_by_type``: the previous run's records of each): a type that collected
    nothing, or far fewer than last time, is unhealthy even when the other types hide it in the total;
    null rates are a type's own (a field of one type is not missing from another's items).
    """
    checks = [
        Check(
            "finished",
            finished,
            None,
            None,
            "the run finished" if finished else "the run did not finish: pages were still pending at its deadline",
        ),
        Check(
            "records_nonzero",
            counts.records > 0,
            float(counts.records),
            1.0,
            f"{counts.records} records"
            if counts.records
            else "the run collected 0 records: a run that writes nothing has failed, whatever its exit code",
        ),
    ]
    drop, ratio = _record_count_drop(counts, previous_records, alerts)
    rate = counts.error_rate
    checks += [drop, _error_rate(counts, alerts)]
    checks.append(_truncated(counts, alerts, follow or Follow()))
    checks.append(_blocked(counts))
    if counts.by_type:
        checks.extend(_carried(counts, alerts))
    if counts.proxy_pool_empty or counts.proxies_ejected:
        checks.append(_proxy_pool(counts))
    gone = _records_gone(counts, alerts)
    if gone is not None:
        checks.append(gone)
    checks.extend(_per_type(counts, previous_by_type or {}, alerts))
    if not counts.by_type:
        checks.extend(_null_rates(counts.null_rates(), alerts.max_null_rate))
    return Verdict(tuple(checks), ratio, rate)


def _record_count_drop(counts: RunCounts, previous_records: int | None, alerts: Alerts) -> tuple[Check, float | None]:
    """This run's records against the previous run's, and the ratio (None on a first run)."""
    if not previous_records:
        return Check("record_count_drop", True, None, alerts.record_count_floor, "first run: no previous"), None
    ratio = counts.records / previous_records
    check = Check(
        "record_count_drop",
        ratio >= alerts.record_count_floor,
        ratio,
        alerts.record_count_floor,
        f"{counts.records} records vs {previous_records} in the previous run "
        f"(ratio {ratio:.2f}, floor {alerts.record_count_floor:.2f})",
    )
    return check, ratio


def _error_rate(counts: RunCounts, alerts: Alerts) -> Check:
    rate = counts.error_rate
    return Check(
        "error_rate",
        rate <= alerts.max_error_rate,
        rate,
        alerts.max_error_rate,
        f"{counts.failed} of {counts.attempted} pages failed (rate {rate:.3f}, ceiling {alerts.max_error_rate:.3f})",
    )


def _records_gone(counts: RunCounts, alerts: Alerts) -> Check | None:
    """The share of the last run's records gone from this one, when the spec sets a ceiling and it is known."""
    if alerts.max_gone_rate is None or counts.records_gone is None or not counts.records_before:
        return None
    gone_rate = counts.records_gone / counts.records_before
    return Check(
        "records_gone",
        gone_rate <= alerts.max_gone_rate,
        gone_rate,
        alerts.max_gone_rate,
        f"{counts.records_gone} of the last run's {counts.records_before} records are gone "
        f"(rate {gone_rate:.3f}, ceiling {alerts.max_gone_rate:.3f})",
    )


def _blocked(counts: RunCounts) -> Check:
    """Did a host refuse the crawler? Always unhealthy: its pages are missing, and more retries would not help."""
    if not counts.blocked:
        return Check("blocked", True, 0.0, 0.0, "no host refused the crawler")
    said = [f"{reason}; {skipped} of its URLs skipped" for reason, skipped in list(counts.blocked.values())[:5]]
    more = f" (and {len(counts.blocked) - 5} more hosts)" if len(counts.blocked) > 5 else ""
    return Check("blocked", False, float(len(counts.blocked)), 0.0, "; ".join(said) + more)


def _carried(counts: RunCounts, alerts: Alerts) -> list[Check]:
    """Did carried data go stale, or fields fail to travel? Said always (a spec with types); unhealthy only if the
    spec asks (``alerts.fail_when_carry_lost``)."""
    advice = "" if alerts.fail_when_carry_lost else " (alerts.fail_when_carry_lost makes this unhealthy)"
    by_type = ", ".join(f"{k} {t.carry_stale}" for k, t in counts.by_type.items() if t.carry_stale)
    stale = (
        Check("carry_stale", True, 0.0, 0.0, "every page seeded with carried data took its linking page's of this run")
        if not counts.carry_stale
        else Check(
            "carry_stale",
            not alerts.fail_when_carry_lost,
            float(counts.carry_stale),
            0.0,
            f"{counts.carry_stale} page(s) kept the last run's carried data: their linking page was not visited "
            f"first, failed or could not be read (by type: {by_type}){advice}",
        )
    )
    dropped_total = sum(counts.carry_dropped.values())
    fields = ", ".join(f"{name} {n}" for name, n in sorted(counts.carry_dropped.items(), key=lambda kv: -kv[1])[:5])
    dropped = (
        Check("carry_dropped", True, 0.0, 0.0, "every carried field fit its link's data")
        if not dropped_total
        else Check(
            "carry_dropped",
            not alerts.fail_when_carry_lost,
            float(dropped_total),
            0.0,
            f"{dropped_total} carried field value(s) left out, over the {MAX_CARRY_BYTES} bytes a link's data holds "
            f"(by field: {fields}){advice}",
        )
    )
    return [stale, dropped]


def _proxy_pool(counts: RunCounts) -> Check:
    """Did the proxy pool run dry? Unhealthy when pages failed for want of a proxy; said when proxies were ejected."""
    ejected = "; ".join(f"{name}: {why}" for name, why in sorted(counts.proxies_ejected.items()))
    if not counts.proxy_pool_empty:
        return Check("proxy_pool", True, 0.0, 0.0, f"proxies ejected, the pool carried on ({ejected})")
    return Check(
        "proxy_pool",
        False,
        float(counts.proxy_pool_empty),
        0.0,
        f"the proxy pool is empty: {counts.proxy_pool_empty} pages failed with no proxy left ({ejected})",
    )


def _truncated(counts: RunCounts, alerts: Alerts, follow: Follow) -> Check:
    """Did a limit cut the crawl short? Said always; unhealthy only if the spec asks (``fail_when_truncated``)."""
    cut = []
    if counts.capped_links:
        cut.append(f"max_pages ({follow.max_pages}) reached: {counts.capped_links} new link(s) left unvisited")
    if counts.beyond_depth:
        cut.append(
            f"max_depth ({follow.depth_limit}) reached: up to {counts.beyond_depth} link(s) beyond it not followed"
        )
    if counts.sitemap_left_out:
        cut.append(
            f"sitemaps: {counts.sitemap_left_out} page URL(s) left out past max_urls or max_pages ({follow.max_pages})"
        )
    left = counts.capped_links + counts.beyond_depth + counts.sitemap_left_out
    if not cut:
        return Check("truncated", True, 0.0, None, "no limit cut the crawl short")
    advice = "" if alerts.fail_when_truncated else " (alerts.fail_when_truncated makes this unhealthy)"
    return Check("truncated", not alerts.fail_when_truncated, float(left), None, "; ".join(cut) + advice)


def _per_type(counts: RunCounts, previous: Mapping[str, int], alerts: Alerts) -> list[Check]:
    """Each page type's own checks: it collected records, not far fewer than last run, fields not missing."""
    checks = []
    for kind, own in counts.by_type.items():
        checks.append(
            Check(
                f"records_nonzero:{kind}",
                own.records > 0,
                float(own.records),
                1.0,
                f"type {kind!r}: {own.records} records"
                if own.records
                else f"type {kind!r} collected 0 records: its pages were not reached, or its selectors match nothing",
            )
        )
        before = previous.get(kind)
        if before:
            ratio = own.records / before
            checks.append(
                Check(
                    f"record_count_drop:{kind}",
                    ratio >= alerts.record_count_floor,
                    ratio,
                    alerts.record_count_floor,
                    f"type {kind!r}: {own.records} records vs {before} in the previous run "
                    f"(ratio {ratio:.2f}, floor {alerts.record_count_floor:.2f})",
                )
            )
        checks.extend(_null_rates(own.null_rates(), alerts.max_null_rate, kind))
    return checks


def _null_rates(rates: dict[str, float], ceiling: float | None, kind: str | None = None) -> list[Check]:
    """A failed check per field missing in more of the items than ``ceiling`` (a page type's own, for ``kind``)."""
    if ceiling is None:
        return []
    name_of, said = (f"{kind}.", f"type {kind!r}: ") if kind is not None else ("", "")
    return [
        Check(
            f"null_rate:{name_of}{name}",
            False,
            rate,
            ceiling,
            f"{said}field {name!r} missing in {rate:.0%} of items (ceiling {ceiling:.0%})",
        )
        for name, rate in rates.items()
        if rate > ceiling
    ]

"""Build a run's :class:`~sluice.domain.summary.RunSummary` from what finalizing counted, wrote and judged.

The summary's shape and JSON keys live in ``sluice.domain.summary``; here is only where each
value comes from: the run's tally (its pages), its output (its records files), its verdict, the
spec's limits, proxies and types, and the usage priced into its cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.domain.cost import US_EAST_1, RunUsage
from sluice.domain.egress import ProxyTally, egress_of
from sluice.domain.runs import RunState, iso
from sluice.domain.summary import (
    FAILED,
    Alert,
    BlockedHostSummary,
    CheckResult,
    Cost,
    Egress,
    Limit,
    Limits,
    NotDueBy,
    OutputFile,
    Outputs,
    PageCounts,
    PreviousRun,
    ProxySummary,
    RecordCounts,
    RunSummary,
    SitemapsRead,
    TypeSummary,
    VerdictSummary,
)
from sluice.domain.tally import RunTally, TypeTally
from sluice.domain.verdict import RunCounts, Verdict
from sluice.pipeline.finalize.output import OutputSummary
from sluice.ports import ObjectStore
from sluice.spec import CrawlSpec


def moment(epoch_s: float) -> str:
    """An epoch time as the summary writes it: UTC, whole seconds."""
    return iso(datetime.fromtimestamp(epoch_s, UTC))


def page_counts(tally: RunTally, spec: CrawlSpec) -> PageCounts:
    """The run's pages by outcome; with types, the pages that kept stale carried data; with a recrawl schedule,
    the pages not due by what said so (a sitemap's lastmod, or the schedule)."""
    by_schedule = tally.not_due_scheduled
    return PageCounts(
        seeds=tally.seeds,
        enqueued=tally.enqueued,
        links=tally.links,
        fetched=tally.fetched,
        not_modified=tally.not_modified,
        not_due=tally.not_due,
        failed=tally.failed,
        gone=tally.gone,
        skipped=tally.skipped,
        pending=max(0, tally.pending),
        links_dropped=tally.dropped_links,
        carry_stale=tally.carry_stale if spec.types is not None else None,
        not_due_by=NotDueBy(tally.not_due - by_schedule, by_schedule) if spec.recrawl is not None else None,
    )


def record_counts(tally: RunTally, output: OutputSummary, gone: tuple[int, int] | None, *, typed: bool) -> RecordCounts:
    """The records as the pages counted them and as the output holds them; against the catalog run, the gone."""
    return RecordCounts(
        total=output.records,
        new=tally.records_new,
        changed=tally.records_changed,
        unchanged=tally.records_unchanged,
        in_output=output.records,
        duplicates_dropped=output.duplicates,
        reused_missing=output.reused_missing,
        fallback_keys=tally.fallback_keys,
        gone=gone[1] if gone is not None else None,
        in_catalog_run=gone[0] if gone is not None else None,
        by_type=dict(output.types) if output.types else None,
        carry_dropped=dict(tally.carry_dropped) if typed else None,
    )


def verdict_summary(verdict: Verdict) -> VerdictSummary:
    return VerdictSummary(
        healthy=verdict.healthy,
        record_count_ratio=verdict.record_count_ratio,
        error_rate=round(verdict.error_rate, 4),
        alerts=tuple(Alert(a.name, a.message, a.value, a.threshold) for a in verdict.alerts),
        checks=tuple(CheckResult(c.name, c.ok, c.message) for c in verdict.checks),
    )


def run_summary(
    run: RunState,
    spec: CrawlSpec,
    counted: RunCounts,
    tally: RunTally,
    output: OutputSummary,
    verdict: Verdict,
    *,
    previous: RunState | None,
    gone: tuple[int, int] | None,
    previous_by_type: Mapping[str, int],
    sitemaps: Mapping[str, Any] | None,
    egress_ips: tuple[str, ...],
    finished: bool,
    stopped: str | None,
    now: float,
) -> RunSummary:
    """The summary of a run finalizing counted (its time and cost are added once they are known)."""
    follow = spec.follow
    egress, proxies = egress_section(spec, tally, egress_ips)
    return RunSummary(
        crawl=run.crawl,
        run_id=run.run_id,
        status="finished" if finished else "unfinished",
        started_at=run.started_at,
        finalized_at=moment(now),
        spec_digest=run.spec_digest,
        catalog_run=run.catalog_run,
        pages=page_counts(tally, spec),
        limits=Limits(Limit(follow.max_pages, tally.capped_links), Limit(follow.max_depth, tally.beyond_depth)),
        records=record_counts(tally, output, gone, typed=spec.types is not None),
        failures=tally.failures.top(),
        skips=tally.skips.top(),
        blocked_hosts={h: BlockedHostSummary(b.reason, b.skipped) for h, b in tally.blocked.items()},
        rejected=tally.rejected.top(),
        null_rates={k: round(v, 4) for k, v in tally.counts(output.records).null_rates().items()},
        previous_run=PreviousRun(previous.run_id, previous.records) if previous else None,
        verdict=verdict_summary(verdict),
        outputs=Outputs(
            output.folder,
            tuple(OutputFile(str(f["key"]), int(str(f["records"])), int(str(f["bytes"]))) for f in output.files),
            output.bytes,
        ),
        types=types_section(counted, tally, previous_by_type) if spec.types is not None else None,
        stopped=stopped,
        egress=egress,
        proxies=proxies or None,
        sitemaps=SitemapsRead(sitemaps) if spec.seeds.sitemaps is not None else None,
    )


def failed_summary(run: RunState, reason: str, *, now: float) -> RunSummary:
    """The summary of a run that ended failed: why, and what it was (its pages were never counted)."""
    return RunSummary(
        crawl=run.crawl,
        run_id=run.run_id,
        status=FAILED,
        failed=reason,
        started_at=run.started_at,
        finalized_at=moment(now),
        spec_digest=run.spec_digest,
        catalog_run=run.catalog_run,
        pages=PageCounts(seeds=run.seeds),
        verdict=VerdictSummary(
            healthy=False,
            alerts=(Alert("finalize", reason),),
            checks=(CheckResult("finalize", False, reason),),
        ),
    )


def egress_section(
    spec: CrawlSpec, tally: RunTally, fixed_ips: tuple[str, ...]
) -> tuple[Egress, dict[str, ProxySummary]]:
    """The run's route (``egress``) and, with a pool, each proxy's pages, failures and ejection (``proxies``)."""
    proxies = {p.name: tally.proxies.get(p.name, ProxyTally()) for p in spec.request.proxies}
    for entry in spec.request.proxies:
        proxies[entry.name].tier = entry.tier
    egress = Egress.from_json(egress_of(fixed_ips=fixed_ips, proxies=proxies))
    return egress, {n: ProxySummary(p.tier, p.pages, p.failures, p.ejected, p.reason) for n, p in proxies.items()}


def previous_types(objects: ObjectStore, previous: RunState | None) -> dict[str, int]:
    """The previous finished run's records per page type, from its summary (empty: none, or it had no types)."""
    if previous is None or previous.summary_key is None:
        return {}
    data = objects.get(previous.summary_key)
    if data is None:
        return {}
    types = RunSummary.from_bytes(data).types or {}
    return {kind: section.records for kind, section in types.items()}


def types_section(counts: RunCounts, tally: RunTally, previous: Mapping[str, int]) -> dict[str, TypeSummary]:
    """Per page type: pages, records in the output, new/changed/unchanged, null rates, against the previous run."""
    section: dict[str, TypeSummary] = {}
    for kind, own in counts.by_type.items():
        pages = tally.types.get(kind, TypeTally())
        before = previous.get(kind)
        section[kind] = TypeSummary(
            pages=pages.pages,
            failed=pages.failed,
            records=own.records,
            new=pages.records_new,
            changed=pages.records_changed,
            unchanged=pages.records_unchanged,
            items=own.items,
            null_rates={k: round(v, 4) for k, v in own.null_rates().items()},
            previous_records=before,
            record_count_ratio=round(own.records / before, 4) if before else None,
            carry_stale=pages.carry_stale,
            carry_dropped=dict(pages.carry_dropped),
        )
    return section


def cost_section(variable: RunUsage, fixed: RunUsage, pages: int) -> Cost:
    """The run's estimated AWS cost at list prices: per line, what grows with pages (per million) and what is fixed."""
    grows, once = variable.price(), fixed.price()
    return Cost(
        estimated_usd=round(grows["total"] + once["total"], 6),
        per_million_pages_usd=round(grows["total"] / max(1, pages) * 1e6, 2),
        fixed_per_run_usd=round(once["total"], 6),
        lines_usd={k: round(grows[k] + once[k], 6) for k in grows if k != "total"},
        usage={"per_page_work": variable.as_dict(), "per_run": fixed.as_dict()},
        prices=f"{US_EAST_1.region}, on-demand list prices read {US_EAST_1.read_on}",
    )

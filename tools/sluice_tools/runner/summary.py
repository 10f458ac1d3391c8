"""What `sluice run` shows: a progress bar while the run is in flight, then a summary for people or for jq."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sluice.domain.summary import PageCounts, RecordCounts, RunSummary, TypeSummary
from sluice_tools.crawl.summary import limit_lines
from sluice_tools.runner.session import LocalRun, RunView
from sluice_tools.runner.session import Progress as ProgressFn


@contextmanager
def progress_bar(crawl: str, *, enabled: bool) -> Iterator[ProgressFn]:
    """A bar of pages done out of pages enqueued, with records and errors so far (on stderr)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pages  records {task.fields[records]}  errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )
    with bar:
        task = bar.add_task(crawl, total=None, records=0, errors=0)

        def show(run: RunView) -> None:
            bar.update(task, completed=run.done, total=max(run.enqueued, 1), records=run.records, errors=run.failed)

        yield show


def as_json(run: LocalRun) -> dict[str, Any]:
    """What `sluice run --json` prints: the run's summary, exactly as ``summary.json`` holds it.

    What only this command knows (dead letters, a resumed run, notes, where the files are) is said on
    stderr (:func:`local_lines`), so stdout stays one object a script can compare with any run's summary."""
    return run.summary.to_json()


def _not_due(pages: PageCounts) -> str:
    """``not due N, `` (and by what, with a recrawl schedule), or nothing when no page was."""
    if not pages.not_due:
        return ""
    by = pages.not_due_by
    why = f" (schedule {by.schedule}, sitemap {by.sitemap})" if by else ""
    return f"not due {pages.not_due}{why}, "


def sitemap_lines(report: Mapping[str, Any] | None) -> list[str]:
    """What reading the run's sitemaps found: documents and pages, what was left out, and each refusal."""
    if report is None:
        return ["  sitemaps not read: the run's start stopped before it had read them"]
    lines = [
        f"  sitemaps {report['documents']} read, {report['urls']} page(s) listed "
        f"({report['with_lastmod']} with lastmod)"
    ]
    left = {
        "past max_urls": report["left_out"],
        "out of scope": report["out_of_scope"],
        "not URLs a run can fetch": report["invalid"],
    }
    if any(left.values()):
        lines.append("           left out: " + ", ".join(f"{n} {why}" for why, n in left.items() if n))
    for refusal in report["refused"][:5]:
        lines.append(f"           refused {refusal['url']}: {refusal['reason']}")
    if report["refused_count"] > 5:
        lines.append(f"           and {report['refused_count'] - 5} more refused (summary.json lists 20)")
    return lines


def type_lines(types: Mapping[str, TypeSummary]) -> list[str]:
    """A line per page type: its pages and records, against the previous run's, and its fields most missing."""
    lines = []
    for kind, t in types.items():
        before = f", previous run {t.previous_records}" if t.previous_records is not None else ""
        nulls = sorted(((v, k) for k, v in t.null_rates.items() if v > 0), reverse=True)[:3]
        missing = ("; " + ", ".join(f"{k} missing in {v:.0%}" for v, k in nulls)) if nulls else ""
        lines.append(
            f"  type {kind}: {t.pages} page(s), {t.records} records (new {t.new}, changed {t.changed}){before}{missing}"
        )
        if t.carry_stale:
            lines.append(f"           {t.carry_stale} page(s) kept the last run's carried data (carry_stale)")
        if t.carry_dropped:
            ranked = sorted(t.carry_dropped.items(), key=lambda kv: -kv[1])[:5]
            fields = ", ".join(f"{k} {n}" for k, n in ranked)
            lines.append(f"           carried fields left out, over a link's bound (carry_dropped): {fields}")
    return lines


def egress_lines(summary: RunSummary) -> list[str]:
    """The route the run's requests took (direct, the stack's fixed addresses, or proxies by tier), and each
    proxy of a pool: pages, failures, and why it was ejected. Nothing for a summary from before routes were kept."""
    egress = summary.egress
    if egress is None:
        return []
    match egress.route:
        case "fixed":
            lines = [f"  egress   fixed address: {', '.join(egress.addresses or ())}"]
        case "proxies":
            tiers = ", ".join(f"tier {t} {n} page(s)" for t, n in (egress.pages_by_tier or {}).items())
            via = f", from {', '.join(egress.via)}" if egress.via else ""
            lines = [f"  egress   proxies: {tiers}{via}"]
        case _:
            lines = ["  egress   direct: no fixed address, no proxy"]
    for name, p in (summary.proxies or {}).items():
        state = f", ejected: {p.reason}" if p.ejected else (f", last failure: {p.reason}" if p.reason else "")
        lines.append(f"  proxy    {name} (tier {p.tier}): {p.pages} page(s), {p.failures} failure(s){state}")
    return lines


def _record_lines(records: RecordCounts) -> list[str]:
    """What the output left out or could not key, and the catalog run's records this run lacks."""
    lines = []
    if records.duplicates_dropped:
        lines.append(f"  output   {records.duplicates_dropped} record(s) also found on another page written once")
    if records.gone:
        lines.append(
            f"  gone     {records.gone} of the last run's {records.in_catalog_run} records are not in this run"
        )
    if records.fallback_keys:
        lines.append(
            f"  keys     {records.fallback_keys} record(s) without their key fields, keyed by url or position"
            " (docs/spec.md: the record key)"
        )
    return lines


def _reason_lines(s: RunSummary) -> list[str]:
    """Null rates, failure and skip reasons, and records dropped for a missing required field."""
    lines = []
    nulls = {k: v for k, v in s.null_rates.items() if v > 0}
    if nulls:
        lines.append("  nulls    " + ", ".join(f"{k} missing in {v:.0%} of items" for k, v in nulls.items()))
    if s.failures:
        lines.append("  failures " + ", ".join(f"{k} x{n}" for k, n in s.failures.items()))
    if s.skips:
        lines.append("  skipped  " + ", ".join(f"{k} x{n}" for k, n in s.skips.items()))
        if any("loopback" in reason for reason in s.skips):
            lines.append("           (targets on 127.0.0.0/8 need --allow-loopback)")
    if s.rejected:
        dropped = ", ".join(f"{field} missing x{n}" for field, n in s.rejected.items())
        lines.append(f"  dropped  records without a required field: {dropped}")
    return lines


def _dead_letter_lines(run: LocalRun) -> list[str]:
    if not run.dead_letters:
        return []
    return [f"  dead-letter queue: {len(run.dead_letters)} message(s) (`sluice redrive` moves them back)"]


def local_lines(run: LocalRun) -> list[str]:
    """What only the command that ran it knows (`sluice run --json` says it on stderr): dead letters, notes, and
    where the run's files are."""
    return _dead_letter_lines(run) + _file_lines(run)


def _file_lines(run: LocalRun) -> list[str]:
    lines = []
    lines.append(f"  records  {run.outputs['records']}")
    if "parquet" in run.outputs:
        lines.append(f"  parquet  {run.outputs['parquet']}")
    lines.append(f"  summary  {run.outputs['summary']}")
    lines.extend(f"  note     {note}" for note in run.notes)
    if "logs" in run.outputs:
        lines.append(f"  logs     {run.outputs['logs']}")
    return lines


def catalog_lines(s: RunSummary, catalog: str | None = None) -> list[str]:
    """The previous run (the record count's ratio is against it) and the catalog run (the run's seeds beyond the
    spec's, and its new, changed, unchanged and gone counts, come from its pages and records): the crawl's last
    finished run, healthy or not (docs/spec.md). ``catalog``: that run's verdict when this run used it
    (:func:`sluice_tools.ops.show.catalog_verdict`), warned of when it was UNHEALTHY."""
    lines = []
    if s.previous_run is not None:
        same = s.catalog_run == s.previous_run.run_id
        lines.append(
            f"  previous run {s.previous_run.run_id}: {s.previous_run.records} records"
            + (" (the catalog run the changes are counted against)" if same else "")
        )
    if s.catalog_run is not None and (s.previous_run is None or s.catalog_run != s.previous_run.run_id):
        lines.append(f"  catalog  run {s.catalog_run} (the changes are counted against its records)")
    if s.catalog_run is not None and catalog is not None and catalog.startswith("UNHEALTHY"):
        lines.append(
            f"  WARNING  the catalog run {s.catalog_run} was {catalog}: this run's seeds and counts came from its "
            "pages and records (a run's catalog is the last finished run, healthy or not)"
        )
    return lines


def as_text(run: LocalRun, catalog: str | None = None) -> str:
    """The run's summary for a person; ``catalog``: the catalog run's verdict (:func:`catalog_lines`)."""
    s = run.summary
    p, v = s.pages, s.verdict
    r = s.records or RecordCounts()
    # A resumed run's "resuming run ..." was said on stderr as the command began (LocalFleet's ``say``), with the
    # other progress: the result on stdout is the run's summary alone.
    then = s.reextracted.before.verdict if s.reextracted is not None and s.reextracted.before is not None else None
    ran = ""
    if then is not None:  # a repaired run: its verdict now, and the one it had when it ran (its alerts then)
        ran = f" since its repair, {'HEALTHY' if then.healthy else 'UNHEALTHY'} when it ran"
        if then.alerts:
            ran += f" ({', '.join(a.check for a in then.alerts)})"
    lines = [
        f"run {run.run_id} of {run.crawl}: {s.status}, {'HEALTHY' if v.healthy else 'UNHEALTHY'}{ran}",
        f"  pages    fetched {p.fetched}, not modified {p.not_modified}, "
        + _not_due(p)
        + f"failed {p.failed}, skipped {p.skipped}",
        f"  records  {r.total} (new {r.new}, changed {r.changed}, unchanged {r.unchanged})",
    ]
    lines += type_lines(s.types or {})
    lines += egress_lines(s)
    if s.limits is not None:
        pages_limit, depth_limit = s.limits.max_pages, s.limits.max_depth
        lines += limit_lines(
            pages_limit.limit or 0,
            pages_limit.links_left,
            depth_limit.limit if depth_limit.limit is not None else pages_limit.limit or 0,
            depth_limit.links_left,
        )
    if s.sitemaps is not None:
        lines += sitemap_lines(s.sitemaps.report)
    if p.pending:
        lines.append(f"  pending  {p.pending} page(s) never finished")
    lines += _record_lines(r)
    if s.reextracted is not None:
        x = s.reextracted
        missing = f", {x.missing_archive} without an archived response kept theirs" if x.missing_archive else ""
        lines.append(
            f"  rebuilt  {x.pages} page(s) re-extracted from the archive at {x.at} with spec "
            f"{x.spec_digest}{missing} (no request, no link followed)"
        )
        before = x.before
        if before is not None and before.verdict is not None:
            was = before.records.total if before.records is not None else None
            counted = f", {was} records" if was is not None else ""
            lines.append(
                f"  as run   {'HEALTHY' if before.verdict.healthy else 'UNHEALTHY'}{counted} "
                "(the verdict and records of the night it ran, before the repair)"
            )
            lines += [f"           then ALERT {a.check}: {a.message}" for a in before.verdict.alerts]
    lines += catalog_lines(s, catalog)
    lines += _reason_lines(s)
    lines += _dead_letter_lines(run)
    for alert in v.alerts:
        lines.append(f"  ALERT {alert.check}: {alert.message}")
    if s.cost is not None:
        cost = s.cost
        lines.append(
            f"  cost     ~${cost.estimated_usd:.4f} on AWS: ${cost.per_million_pages_usd:.2f} per million pages"
            f" + ${cost.fixed_per_run_usd:.4f} per run"
        )
    lines += _file_lines(run)
    return "\n".join(lines)

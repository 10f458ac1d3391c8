"""Re-extract a finished run from its raw archive: the run's records rebuilt with another spec, no request sent.

When night N's selector broke, the pages were fetched all the same and, with ``output.archive``,
kept as WARC. ``sluice reextract RUN`` reads back every counted page's response (one range read
of its :class:`~sluice.domain.pages.ArchiveRef`: this run's archive for a page it fetched, an
earlier run's for a page it reused), extracts it with the spec given (default: the crawl's
current one), and rebuilds the run as finalizing built it (:func:`~sluice.pipeline.finalize.driver.rebuild_output`):
records files, page index, manifest and a summary with a fresh verdict, and a ``reextracted``
section saying what was done. No link is followed again: a page that only the fixed spec would
have reached is not in the run, and the summary says so.

Nothing collected is lost: a page whose response is not in the archive (the switch was off when it
was fetched, or the file is gone or damaged) keeps the records it had, and is counted and named. The order
makes an interruption harmless, and the whole is idempotent: new parts (their keys named after the
spec's digest, so a second run writes the same keys with the same bytes) before the results that
point at them, then the output (and the removal of output files the new manifest no longer lists),
then the run's spec digest and verdict. Run it again after an
interruption; the next nightly run then reuses the repaired records as it reuses any run's.

Refused, with the reason: a run that is not finished, a spec of another crawl, a crawl with a run in
flight (its catalog must not change under it), or a run with no archived response at all. A page
that keeps its records has them copied from the run's own output (its page index says where), never
from the run's working parts, which a finished local run has deleted: a truncated, corrupt or
deleted archive file leaves its pages with their records, each counted and named with "archive
record unreadable: REASON".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from sluice.domain.errors import Missing
from sluice.domain.layout import manifest_key, part_key, summary_key
from sluice.domain.pages import PageResult, PartBlock, Prior, UrlEntry, url_hash, url_number
from sluice.domain.runs import RunState
from sluice.domain.summary import BeforeReextraction, MissingArchive, Reextraction, RunSummary
from sluice.extraction.extract import Record
from sluice.fetch.outcomes import Fetched, Validators
from sluice.messages import UrlTask
from sluice.observability import logger
from sluice.pipeline.finalize.driver import rebuild_output
from sluice.pipeline.finalize.output import output_block
from sluice.pipeline.services import Services
from sluice.pipeline.visit.archive import ArchivedResponse, ArchiveUnreadable, read_response
from sluice.pipeline.visit.page_results import RecordsPart, extract_again
from sluice.spec import CrawlSpec

CHUNK_PAGES = 500
"""Pages read and extracted at a time: their records are one part, their results one write call."""
READERS = 8
"""Archive range reads in flight."""
NAMED = 20
"""Pages without an archived response the summary names (all are counted)."""


class ReextractRefused(ValueError):
    """The run cannot be re-extracted as asked; the text says why and what to do."""


@dataclass(frozen=True, slots=True)
class Projection:
    """What re-extracting a run would make of its records, counted before anything is written: the records its
    pages would hold (kept pages' as they are), and the record checks the spec's thresholds would fail."""

    crawl: str
    run_id: str
    pages: int
    """Pages that would be re-extracted."""
    records_now: int
    records_after: int
    healthy_now: bool
    alerts: tuple[str, ...]
    """Checks the rebuilt run would fail on its records: ``records_nonzero``, ``record_count_drop``."""
    floor: float

    @property
    def worse(self) -> bool:
        return bool(self.alerts)

    def text(self) -> str:
        verdict = f"UNHEALTHY ({', '.join(self.alerts)})" if self.alerts else "no record check failed"
        now = "healthy" if self.healthy_now else "UNHEALTHY"
        return (
            f"re-extracting run {self.run_id} of {self.crawl} would re-extract {self.pages} page(s): "
            f"{self.records_after} records where it has {self.records_now} now ({now}); verdict {verdict} "
            f"(record count floor {self.floor:.2f})"
        )


class ReextractWorse(ReextractRefused):
    """The re-extracted output would fail record checks the run passes now: nothing was replaced."""

    def __init__(self, projection: Projection) -> None:
        self.projection = projection
        super().__init__(
            f"{projection.text()}: the run's output is left as it is; check the spec (`sluice parse`), "
            "or pass --force to replace it all the same"
        )


@dataclass(frozen=True, slots=True)
class Reextracted:
    crawl: str
    run_id: str
    summary: RunSummary
    summary_key: str
    pages: int
    """Pages whose records were extracted again from the archive."""
    missing_archive: int
    """Pages holding records whose response the archive does not have: their records stay as they were."""
    seconds: float


@dataclass
class _Tally:
    pages: int = 0
    records: int = 0
    missing: int = 0
    refused: int = 0
    """Pages extraction refused this time (too complex to parse): they keep the records they had."""
    lost: int = 0
    """Pages to keep whose records the run's output did not hold (none, unless it was altered)."""
    parts: int = 0
    from_runs: set[str] = field(default_factory=set)
    named: list[dict[str, str]] = field(default_factory=list)
    sizes: dict[str, int | None] = field(default_factory=dict)
    """Each archive file's size, asked once (a file holds a batch's pages; readers share it)."""

    def miss(self, url: str, why: str) -> None:
        self.missing += 1
        if len(self.named) < NAMED:
            self.named.append({"url": url, "reason": why})


def reextract_run(
    crawl: str, run_id: str, services: Services, spec: CrawlSpec | None = None, *, force: bool = False
) -> Reextracted:
    """Rebuild a finished run's records from its archive with ``spec`` (default: the crawl's current spec).

    Refused (:class:`ReextractWorse`), before anything is written, when the rebuilt records would fail the spec's
    record checks (none, or fewer than ``alerts.record_count_floor`` of the run's): a spec broken for the pages
    replaced a healthy run's records with nothing. ``force`` replaces them all the same."""
    started = time.monotonic()
    run, spec = _checked(crawl, run_id, services, spec)
    if not force:
        projection = _project(services, spec, run)
        if projection.worse:
            raise ReextractWorse(projection)
    tally = _Tally()
    in_output = output_block(services.objects, crawl, run_id)
    for entries in _chunks(services.frontier.scan(run_id)):
        _reextract_chunk(services, spec, crawl, run_id, entries, run.catalog_run, tally, in_output)
    old_summary = _summary(services, crawl, run_id)
    stopped = old_summary.stopped if old_summary else None
    old_files = _listed_files(services, crawl, run_id)
    rebuilt = rebuild_output(services, replace(run, spec_digest=spec.digest()), spec, stopped=stopped)
    # Output files the old manifest listed and the new one does not (the run has fewer, or other types'):
    # left there, a query of the folder would read their records twice.
    for stale in sorted(old_files - {str(f["key"]) for f in rebuilt.output.files}):
        services.objects.delete(stale)
    seconds = time.monotonic() - started
    summary = _rebuilt_summary(rebuilt.summary, old_summary, run, spec, tally, seconds)
    key = summary_key(crawl, run_id)
    services.objects.put(key, summary.to_bytes(), "application/json")
    verdict, output = rebuilt.verdict, rebuilt.output
    services.ledger.reextracted(
        crawl, run_id, spec_digest=spec.digest(), healthy=verdict.healthy, records=output.records
    )
    logger.info(
        "run re-extracted",
        extra={
            "crawl": crawl,
            "run_id": run_id,
            "pages": tally.pages,
            "missing_archive": tally.missing,
            "records": output.records,
            "healthy": verdict.healthy,
        },
    )
    return Reextracted(crawl, run_id, summary, key, tally.pages, tally.missing, seconds)


def project_reextraction(crawl: str, run_id: str, services: Services, spec: CrawlSpec | None = None) -> Projection:
    """What :func:`reextract_run` would make of the run's records, writing nothing (``sluice reextract --dry-run``)."""
    run, spec = _checked(crawl, run_id, services, spec)
    return _project(services, spec, run)


def _checked(crawl: str, run_id: str, services: Services, spec: CrawlSpec | None) -> tuple[RunState, CrawlSpec]:
    """The run and the spec, or ReextractRefused saying why the run cannot be re-extracted with it."""
    run = services.ledger.get_run(crawl, run_id)
    if run is None:
        raise ReextractRefused(f"crawl {crawl!r} has no run {run_id}")
    if run.status != "finished":
        raise ReextractRefused(f"run {run_id} is {run.status}, not finished: re-extract it once it has finished")
    spec = spec if spec is not None else services.spec(crawl)
    if spec.name != crawl:
        raise ReextractRefused(f"the spec is crawl {spec.name!r}'s, and run {run_id} is crawl {crawl!r}'s")
    lock = services.ledger.active_run(crawl)
    if lock is not None:
        raise ReextractRefused(
            f"crawl {crawl!r} has run {lock.run_id} in flight (since {lock.started_at}): re-extract once it has "
            "finished, so that its catalog does not change under it"
        )
    _check_sources(services, run_id)
    return run, spec


def _project(services: Services, spec: CrawlSpec, run: RunState) -> Projection:
    """Every archived page of the run extracted with ``spec``, nothing written: the records the run would hold (a
    page not re-extracted keeps its own), and the record checks that would fail against what it holds now."""
    crawl, run_id = run.crawl, run.run_id
    pages = after = 0
    sizes: dict[str, int | None] = {}
    now = int(services.clock())
    for entries in _chunks(services.frontier.scan(run_id)):
        held = [e.result for e in entries if e.result is not None and e.result.holds_records]
        archived = [r for r in held if r.archive is not None]
        after += sum(r.counts.total for r in held if r.archive is None)
        before = _catalog_digests(services, run.catalog_run, [url_hash(r.url) for r in archived])
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            responses = list(pool.map(lambda r: _read(services, crawl, r, sizes), archived))
        for result, response in zip(archived, responses, strict=True):
            new = None if isinstance(response, str) else _extract(spec, result, response, before.get(result.url), now)
            if new is None:  # kept as it is
                after += result.counts.total
                continue
            pages += 1
            after += len(new[1])
    summary = _summary(services, crawl, run_id)
    records_now = summary.records_total if summary is not None else (run.records or 0)
    floor = spec.alerts.record_count_floor
    alerts = []
    if records_now and not after:
        alerts.append("records_nonzero")
    if records_now and after / records_now < floor:
        alerts.append("record_count_drop")
    healthy = summary.healthy if summary is not None else bool(run.healthy)
    return Projection(crawl, run_id, pages, records_now, after, healthy, tuple(alerts), floor)


def _rebuilt_summary(
    rebuilt: RunSummary, old: RunSummary | None, run: RunState, spec: CrawlSpec, tally: _Tally, seconds: float
) -> RunSummary:
    """The rebuilt run's summary: its new records and verdict, what the run cost and when it ran as they were,
    and what re-extraction did (with, the first time, what the run said when it ran)."""
    section = Reextraction(
        at=rebuilt.finalized_at or "",
        spec_digest=spec.digest(),
        previous_spec_digest=run.spec_digest,
        pages=tally.pages,
        records=tally.records,
        from_runs=tuple(sorted(tally.from_runs)),
        missing_archive=tally.missing,
        missing_named=tuple(MissingArchive(m["url"], m["reason"]) for m in tally.named),
        refused=tally.refused,
        records_lost=tally.lost,
        links_followed=False,
        seconds=round(seconds, 3),
    )
    if old is None:
        return replace(rebuilt, reextracted=section)
    # What the run said when it ran: the alerts it raised then stay in its history (`sluice report` marks
    # them). A second re-extraction keeps the first one's record of it.
    earlier = old.reextracted.before if old.reextracted is not None else None
    before = earlier or BeforeReextraction(old.verdict, old.records, old.null_rates)
    # The run's cost and start are what they were: only its records were rebuilt.
    return replace(
        rebuilt,
        cost=old.cost if old.cost is not None else rebuilt.cost,
        finalize_s=old.finalize_s if old.finalize_s is not None else rebuilt.finalize_s,
        sitemaps=old.sitemaps if old.sitemaps is not None else rebuilt.sitemaps,
        started_at=old.started_at or rebuilt.started_at,
        finalized_at=old.finalized_at,
        reextracted=replace(section, before=before),
    )


def _summary(services: Services, crawl: str, run_id: str) -> RunSummary | None:
    raw = services.objects.get(summary_key(crawl, run_id))
    return RunSummary.from_bytes(raw) if raw is not None else None


def _listed_files(services: Services, crawl: str, run_id: str) -> set[str]:
    raw = services.objects.get(manifest_key(crawl, run_id))
    return {str(f["key"]) for f in json.loads(raw).get("files", [])} if raw is not None else set()


def _check_sources(services: Services, run_id: str) -> None:
    """Refuse before writing anything: a run with nothing archived (there is nothing to re-extract from)."""
    for entry in services.frontier.scan(run_id, consistent=False):
        if entry.result is not None and entry.result.holds_records and entry.result.archive is not None:
            return
    raise ReextractRefused(
        f"run {run_id} has no archived response (output.archive was off for it): "
        "switch output.archive on, and the next run keeps what it fetches"
    )


def _chunks(entries: Iterator[UrlEntry]) -> Iterator[list[UrlEntry]]:
    chunk: list[UrlEntry] = []
    for entry in entries:
        chunk.append(entry)
        if len(chunk) >= CHUNK_PAGES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _reextract_chunk(
    services: Services,
    spec: CrawlSpec,
    crawl: str,
    run_id: str,
    entries: list[UrlEntry],
    catalog_run: str | None,
    tally: _Tally,
    in_output: Callable[[int], tuple[str, int, int] | None],
) -> None:
    """One chunk of the run's pages: read their responses, extract, write one part, then their results. A page
    that is not re-extracted (no archived response, an unreadable one, extraction refused) keeps its records: they
    are copied from the run's own output into the part, as a finished run's working parts may be gone."""
    pages = [e.result for e in entries if e.result is not None and e.result.holds_records]
    archived = [r for r in pages if r.archive is not None]
    kept = []
    for result in pages:
        if result.archive is None:
            tally.miss(result.url, "no archived response (output.archive was off when it was fetched)")
            kept.append(result)
    before = _catalog_digests(services, catalog_run, [url_hash(r.url) for r in archived])
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        responses = list(pool.map(lambda r: _read(services, crawl, r, tally.sizes), archived))
    part = RecordsPart(part_key(crawl, run_id, f"reextract-{spec.digest()}-{entries[0].url_hash[:16]}"))
    replaced: list[PageResult] = []
    upserts: dict[str, Record] = {}
    now = int(services.clock())  # what extraction stamps; each result keeps its own fetch time
    for result, response in zip(archived, responses, strict=True):
        if isinstance(response, str):
            tally.miss(result.url, response)
            kept.append(result)
            continue
        new = _extract(spec, result, response, before.get(result.url), now)
        if new is None:
            tally.refused += 1
            kept.append(result)
            continue
        result_new, records, changed = new
        upserts |= {record.key: record for record in changed}
        if result.archive is not None:
            tally.from_runs.add(result.archive.run_id)
        tally.pages += 1
        tally.records += len(records)
        replaced.append(part.add_records(result_new, records))
    replaced += _keep(services, crawl, run_id, [r for r in kept if r.block is not None], part, in_output, tally)
    if part.body:
        services.objects.put(part.key, bytes(part.body), "application/x-ndjson")  # before any result points at it
        tally.parts += 1
    if services.records is not None and spec.output.records_table and upserts:
        services.records.upsert(crawl, run_id, list(upserts.values()))  # as the fetcher does, each key once
    if replaced:
        services.frontier.replace(run_id, replaced)


def _keep(
    services: Services,
    crawl: str,
    run_id: str,
    kept: list[PageResult],
    part: RecordsPart,
    in_output: Callable[[int], tuple[str, int, int] | None],
    tally: _Tally,
) -> list[PageResult]:
    """The results of pages that keep their records, each pointing at a copy of them in ``part``: read from the
    run's output (a reused page, with no block, is read from the catalog run's output as always)."""
    places = [in_output(url_number(url_hash(r.url))) for r in kept]

    def read(place: tuple[str, int, int] | None) -> bytes | None:
        return None if place is None else services.objects.get_range(*place)

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        blocks = list(pool.map(read, places))
    results = []
    part_id = part.part_id
    for result, data in zip(kept, blocks, strict=True):
        if not data:  # nothing of it in the output: there is nothing left to keep
            tally.lost += 1
            results.append(replace(result, block=None, reused=False))
            continue
        start = len(part.body)
        part.body += data
        results.append(replace(result, block=PartBlock(part_id, start, len(data))))
    return results


def _read(services: Services, crawl: str, result: PageResult, sizes: dict[str, int | None]) -> ArchivedResponse | str:
    assert result.archive is not None  # noqa: S101 - only archived pages are read
    try:
        return read_response(services.objects, crawl, result.archive, sizes)
    except (ArchiveUnreadable, Missing) as exc:  # Missing: the file went between its size and its read
        return f"archive record unreadable: {exc}"


def _catalog_digests(services: Services, catalog_run: str | None, hashes: list[str]) -> dict[str, bytes]:
    """The catalog run's record digests of these pages, by URL: what new, changed and unchanged are counted against."""
    if catalog_run is None or not hashes:
        return {}
    found = services.frontier.entries(catalog_run, hashes)
    return {e.url: e.result.digests for e in found.values() if e.result is not None}


def _extract(
    spec: CrawlSpec, result: PageResult, response: ArchivedResponse, digests: bytes | None, now: int
) -> tuple[PageResult, list[Record], list[Record]] | None:
    """The page's result with its records extracted again; None if extraction refused the page (it keeps its own)."""
    task = UrlTask(url=result.url, depth=result.depth, origin=result.origin, via=response.via, carry=response.carry)
    outcome = Fetched(
        url=result.url,
        final_url=response.final_url,
        status=response.status,
        content_type=response.content_type,
        body=response.body,
        validators=Validators(result.etag, result.last_modified),
        attempts=1,
        elapsed_s=0.0,
    )
    prior = Prior(digests=digests) if digests else None
    fresh, records, upserts = extract_again(spec, task, prior, outcome, now)
    if fresh.outcome != "fetched":
        return None
    return (
        replace(
            result,
            counts=fresh.counts,
            items=fresh.items,
            missing=fresh.missing,
            rejected=fresh.rejected,
            digests=fresh.digests,
            fallback_keys=fresh.fallback_keys,
            type=fresh.type,  # what the spec takes the page for now (its URL and the rule that led there)
            block=None,
            reused=False,
        ),
        records,
        upserts,
    )

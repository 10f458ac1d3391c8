"""The page-result rules: what one URL's visit counts as, from what the catalog run knew and what the site answered.

Pure: no queue, no table, no clock (the caller says when ``now`` is). A batch's visits
(:mod:`sluice.pipeline.visit.page`) and a re-extraction (:mod:`sluice.pipeline.reextract`) both
make their results here, so a page counts the same whichever way its records were made.

"Reused" is the word for records the catalog run made that this run takes as they are: a 304, the
same body again, or a page not due. "Carried" is the other word: fields a linking page carries
along a link (the spec's ``carry``, :mod:`sluice.pipeline.visit.carried`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sluice.domain.pages import (
    MAX_DIGESTS,
    MAX_REASON,
    PageResult,
    PartBlock,
    Prior,
    RecordCounts,
    classify_digests,
    record_digest,
)
from sluice.domain.recrawl import Schedule
from sluice.extraction.charset import parser_input
from sluice.extraction.extract import Record, extract_page, record_line
from sluice.extraction.limits import PageTooComplex
from sluice.fetch.outcomes import Failed, Fetched, Validators
from sluice.messages import UrlTask
from sluice.observability import logger
from sluice.pipeline.visit.carried import by_link, keep_carried
from sluice.pipeline.visit.links import FoundLinks, carried_data, children, with_carried
from sluice.spec import CrawlSpec


@dataclass(slots=True)
class Visit:
    """One URL's visit, before the batch writes it: its result, its records, the links it found."""

    task: UrlTask
    result: PageResult
    records: list[Record] = field(default_factory=list)
    links: FoundLinks | None = None
    """The links it found to claim, as plain URLs (a task is made only for a link the run may not hold)."""
    upserts: list[Record] = field(default_factory=list)
    beyond_depth: list[str] = field(default_factory=list)
    """Links of a page at follow.max_depth, not followed: counted, if the run does not know them."""


@dataclass(slots=True)
class Retry:
    """A URL whose fetch failed for now: its message goes back to the queue (:mod:`sluice.pipeline.visit.requeue`)."""

    task: UrlTask
    failure: Failed


class RecordsPart:
    """The batch's records as one JSON Lines object; each page's lines are one contiguous block.

    What a batch writes, and a re-extraction: pages' records added as blocks to an empty part at ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.body = bytearray()

    @property
    def part_id(self) -> str:
        """The part's name as a block names it: the key's last segment without its suffix."""
        return self.key.rsplit("/", 1)[-1].removesuffix(".jsonl")

    def add(self, visit: Visit) -> PageResult:
        return self.add_records(visit.result, visit.records)

    def add_records(self, result: PageResult, records: list[Record]) -> PageResult:
        """The page's records as one block of the part; its result pointing at the block (unchanged if none). A map
        of what it carried along its links too large for the result goes in the part too (:func:`keep_carried`)."""
        result = keep_carried(result, self.part_id, self.body)
        if not records:
            return result
        start = len(self.body)
        self.body += "".join(map(record_line, records)).encode()  # one encode and one append a page, not a record
        return result.but(block=PartBlock(self.part_id, start, len(self.body) - start))


def skipped_result(task: UrlTask, reason: str) -> PageResult:
    return PageResult(url=task.url, depth=task.depth, origin=task.origin, outcome="skipped", reason=reason[:MAX_REASON])


def failed_result(task: UrlTask, outcome: Failed, prior: Prior | None = None) -> PageResult:
    return PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="failed",
        reason=outcome.reason[:MAX_REASON],
        status=outcome.status,
        # No records this run, but the digests of the last ones: the next run still tells them apart.
        digests=prior.digests if prior is not None else b"",
        interval=prior.interval if prior is not None else None,  # asked next run (no fetch time), from where it was
    )


def reused_result(
    task: UrlTask,
    prior: Prior,
    validators: Validators,
    status: int | None,
    *,
    due: bool = True,
    now: int | None = None,
    why: str | None = None,
) -> PageResult:
    """A page whose records are the catalog run's, reused (a 304, the same body again, or not due): counted,
    nothing rewritten. A page not due keeps the time of the fetch its records come from, and its interval, and
    says ``why`` (:data:`~sluice.domain.pages.BY_SCHEDULE`, or nothing for a sitemap); the others were fetched
    ``now``."""
    return PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="not_due" if not due else "not_modified" if status is None else "fetched",
        status=(status or 304) if due else None,  # a page not due was not asked: it has no status
        etag=validators.etag,
        last_modified=validators.last_modified,
        body_hash=prior.body_hash,
        counts=RecordCounts(unchanged=prior.records),
        digests=prior.digests,
        reused=prior.records > 0,
        fetched_at=now if due else prior.fetched_at,
        reason=None if due else why,
        interval=None if due else prior.interval,
        archive=prior.archive,  # no new response: the one its records come from (a fetch above replaces it)
    )


def fetched_visit(spec: CrawlSpec, task: UrlTask, prior: Prior | None, outcome: Fetched, now: int) -> Visit:
    """A page the site answered with a body: reused if it is the body the catalog run saw, else extracted, its
    records classified against the catalog run's, and its links (with what they carry) found."""
    body_hash = outcome.content_hash
    if prior is not None and prior.reused and prior.body_hash == body_hash:
        # The same bytes as the catalog run saw: the same records and links (the spec is unchanged,
        # or the scheduler would not have said "reused"), so nothing is extracted or rewritten.
        return Visit(task, reused_result(task, prior, outcome.validators, outcome.status, now=now))
    try:
        extraction = extract_page(spec, outcome.final_url, parser_input(outcome.body, outcome.content_type), task.via)
    except PageTooComplex as exc:  # refused before parsing: failed for good, with the reason
        return Visit(task, failed_result(task, Failed(task.url, str(exc), False, outcome.status, None, 1), prior))
    records = unique_records(with_carried(extraction.records, task.carry))
    digests = [record_digest(r.identity, r.content_hash) for r in records]  # each record's, worked out once
    packed = b"".join(digests) if len(records) <= MAX_DIGESTS else b""
    counts, upserts = classify_records(records, prior, digests)
    result = PageResult(
        url=task.url,
        depth=task.depth,
        origin=task.origin,
        outcome="fetched",
        status=outcome.status,
        etag=outcome.validators.etag,
        last_modified=outcome.validators.last_modified,
        body_hash=body_hash,
        counts=counts,
        items=extraction.items,
        missing={k: v for k, v in extraction.missing.items() if v and not _filled(k, task.carry)},
        rejected={k: v for k, v in extraction.rejected.items() if v},
        digests=packed,
        fallback_keys=sum(r.key_fallback for r in records),
        fetched_at=now,
        type=extraction.type,
    )
    carried, carry_dropped = carried_data(spec, extraction, records)
    found = children(task, extraction.links, spec, extraction.rules, carried)
    if found.dropped or extraction.links_dropped:
        result = replace(result, dropped_links=found.dropped + extraction.links_dropped)
    if carried:
        result = replace(result, carried_by_link=by_link(carried))
    if carry_dropped:
        result = replace(result, carry_dropped=dict(carry_dropped))
        logger.warning("carried fields dropped", extra={"url": task.url, "fields": dict(carry_dropped)})
    return Visit(task, result, records, found.links, upserts, found.beyond_depth)


def extract_again(
    spec: CrawlSpec, task: UrlTask, prior: Prior | None, outcome: Fetched, now: int
) -> tuple[PageResult, list[Record], list[Record]]:
    """A page's result, records and new or changed records from a response already had (``sluice reextract``),
    as a fetch makes them. Never reused (the records are extracted whatever the body's hash), and its links
    are not followed. ``now`` is the result's fetch time (a re-extraction's caller keeps the result's own)."""
    visit = fetched_visit(spec, task, replace(prior, reused=False) if prior is not None else None, outcome, now)
    return visit.result, visit.records, visit.upserts


def not_due_yet(schedule: Schedule, task: UrlTask, prior: Prior, now: int) -> bool:
    """The recrawl schedule's say, for a page no sitemap lastmod decides: not due, and its records can be reused."""
    if task.lastmod is not None or not prior.reusable:
        return False  # a sitemap's lastmod knows better than a guess; records that cannot be reused are fetched
    return not schedule.due(prior.fetched_at, prior.interval, now, seed=task.depth == 0)


def page_changed(result: PageResult, prior: Prior | None) -> bool:
    """Whether a fetch found the page changed: a record new, changed or gone from it (a 304 or the same body: none);
    for a page of links alone, its body (new links are all it has to give)."""
    if prior is None:
        return True
    counts = result.counts
    if counts.new or counts.changed or counts.unchanged < prior.records:
        return True
    return counts.total == 0 and result.body_hash != prior.body_hash


def classify_records(
    records: list[Record], prior: Prior | None, digests: list[bytes] | None = None
) -> tuple[RecordCounts, list[Record]]:
    """New, changed and unchanged against the catalog run's digests of this page; the new and changed.

    ``digests`` are the records' own, as :func:`~sluice.domain.pages.record_digests` packs each (key digest,
    then content digest), when the caller has them already."""
    if digests is None:
        digests = [record_digest(r.identity, r.content_hash) for r in records]
    new, changed, positions = classify_digests(digests, prior.digests if prior is not None else b"")
    upserts = [records[i] for i in positions]
    return RecordCounts(new, changed, len(records) - new - changed), upserts


def unique_records(records: list[Record]) -> list[Record]:
    """A page's records, each key once (the first), as the run's output holds them."""
    identities = [r.identity for r in records]
    if len(set(identities)) == len(identities):
        return records  # the usual page: no key twice, nothing to copy
    seen: set[str] = set()
    unique = []
    for record in records:
        if record.identity not in seen:
            seen.add(record.identity)
            unique.append(record)
    return unique


def awaits_parent(spec: CrawlSpec, task: UrlTask) -> bool:
    """A page the catalog seeded with data its linking page carried: it takes that page's data of this run."""
    return spec.types is not None and task.awaits_linking_page


def page_type(spec: CrawlSpec, visit: Visit) -> str | None:
    """The type a page's result is counted under: what its extraction took it for (the final URL's), else what
    its URL and the rule that led there say (a page reused, failed or skipped was not extracted)."""
    if spec.types is None:
        return None
    return visit.result.type or spec.page_type(visit.task.url, visit.task.via)


def _filled(name: str, carry: dict[str, str | int | float | bool | None] | None) -> bool:
    """A field the page lacked but its linking page carried a value for: no record misses it."""
    return carry is not None and carry.get(name) is not None

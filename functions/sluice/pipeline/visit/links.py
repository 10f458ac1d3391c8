"""Links found on a page, into the run: deduplicated before they cost a write, claimed once, sent.

One rule re-sends: a link whose claim belongs to this page and is still waiting is sent again,
whichever visit of the page this is. A duplicate message is harmless (a URL's result is written
once); a lost one is not. Seeds are never claimed (the run's seed set says which URLs are seeds).
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sluice.domain.pages import MAX_URL, url_hash
from sluice.domain.runs import RunState
from sluice.domain.seedset import SeedSet
from sluice.extraction.extract import PageExtraction, Record
from sluice.messages import UrlTask
from sluice.pipeline.services import Services
from sluice.ports import Claims
from sluice.spec import CrawlSpec
from sluice.spec.models import MAX_CARRY_BYTES

CACHE_URLS = 200_000
"""Links a container remembers per run (about 20 MB): each costs a lookup at most once per container."""


def parent_id(page_url: str) -> str:
    """How a claim names the page that made it: the first 16 hex characters of its URL hash."""
    return url_hash(page_url)[:16]


@dataclass
class ClaimCache:
    """Links this container has already seen claimed (or seeded) in a run, with the page that claimed them."""

    limit: int = CACHE_URLS
    _seen: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def settled(self, hash_: str, parent: str | None) -> bool:
        """True if the link is known to be in the run through another page (nothing to send)."""
        owner = self._seen.get(hash_)
        if owner is None:
            return False
        self._seen.move_to_end(hash_)
        return owner != parent

    def known(self, hash_: str) -> bool:
        """True if the link is known to be in the run (claimed, by any page)."""
        return hash_ in self._seen

    def remember(self, hash_: str, owner: str) -> None:
        self._seen[hash_] = owner
        self._seen.move_to_end(hash_)
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Children:
    """A page's links, as the run takes them."""

    tasks: list[UrlTask]
    """The links as tasks one hop further."""
    dropped: int
    """Links longer than a task takes: dropped and counted, never fatal to the page."""
    beyond_depth: list[str]
    """The links of a page at ``follow.max_depth``: not followed (the run may know some already)."""


def children(
    page: UrlTask,
    links: Iterable[str],
    spec: CrawlSpec,
    rules: Mapping[str, str] | None = None,
    carried: Mapping[str, CarriedData] | None = None,
) -> Children:
    """The page's links as tasks one hop further, unless the page is at ``follow.max_depth``.

    ``rules`` names the follow rule of each link a page type's rule found, ``carried`` the data each
    link carries: a task holds both. A link is claimed once, so a page two pages link to keeps the
    data of the claim that won (the first)."""
    unique = list(dict.fromkeys(links))
    if page.depth >= spec.follow.depth_limit:
        return Children([], 0, unique)
    parent = parent_id(page.url)
    fit = [link for link in unique if len(link) <= MAX_URL]
    rules, carried = rules or {}, carried or {}
    tasks = [
        UrlTask(
            url=link, depth=page.depth + 1, origin="link", parent=parent, via=rules.get(link), carry=carried.get(link)
        )
        for link in fit
    ]
    return Children(tasks, len(unique) - len(fit), [])


CarriedData = dict[str, str | int | float | bool | None]


def carried_data(
    spec: CrawlSpec, extraction: PageExtraction, records: Sequence[Record]
) -> tuple[dict[str, CarriedData], Counter[str]]:
    """Per link a page type's rule found, the fields the rule carries: from the record of the item holding
    the link (a listing card's price goes to its own book), else from the page's first record; and, by field,
    how many links left a field out.

    Only JSON scalars travel (a ``many`` field's list is left out). A link's data is bounded by what a task holds
    (:data:`~sluice.spec.models.MAX_CARRY_BYTES`): fields are taken in the rule's order while they fit, and a
    field that does not is left out of that link's data and counted (the smaller fields after it still go)."""
    dropped: Counter[str] = Counter()
    if spec.types is None or extraction.type is None or not extraction.rules or not records:
        return {}, dropped
    follow = spec.types[extraction.type].follow
    by_position = {r.position: r for r in records}
    owners = extraction.owners or {}
    carried: dict[str, CarriedData] = {}
    for link, rule in extraction.rules.items():
        fields = follow[rule].carry if rule in follow else []
        if not fields:
            continue
        record = by_position.get(owners[link]) if link in owners else records[0]
        if record is None:  # the item holding the link was dropped (a required field missing)
            continue
        data: CarriedData = {}
        size = 2  # the braces
        for name in fields:
            value = record.data.get(name)
            if not _scalar(value):
                continue
            entry = len(json.dumps({name: value}, separators=(",", ":"))) - 2 + (1 if data else 0)  # and a comma
            if size + entry > MAX_CARRY_BYTES:
                dropped[name] += 1
                continue
            data[name] = value
            size += entry
        if data:
            carried[link] = data
    return carried, dropped


def with_carried(records: list[Record], carry: Mapping[str, object] | None) -> list[Record]:
    """Each record with the fields its page's linking page carried: a field the page gave a value keeps it."""
    if not carry:
        return records
    merged = []
    for record in records:
        data = dict(record.data)
        for name, value in carry.items():
            if data.get(name) is None:
                data[name] = value
        merged.append(replace(record, data=data))
    return merged


def _scalar(value: object) -> bool:
    return value is not None and isinstance(value, str | int | float | bool)


def unknown_beyond_depth(links: Iterable[str], seeds: SeedSet, cache: ClaimCache) -> int:
    """How many of a max-depth page's links the run is not known to hold: what the depth limit left out.

    Known means a seed or a link this container saw claimed; a link claimed only by another
    container counts here, so the figure is an upper bound.
    """
    left = 0
    for link in links:
        h = url_hash(link)
        if h not in seeds and not cache.known(h):
            left += 1
    return left


def claim_links(
    services: Services, run: RunState, spec: CrawlSpec, found: Sequence[UrlTask], seeds: SeedSet, cache: ClaimCache
) -> Claims:
    """Claim and send a batch's links: the ones this call claimed (what ``enqueued`` grows by), and the new
    ones ``max_pages`` left out."""
    candidates: dict[str, UrlTask] = {}
    for task in found:
        h = url_hash(task.url)
        if h in candidates or h in seeds or cache.settled(h, task.parent):
            continue
        candidates[h] = task
    if not candidates:
        return Claims()
    known = services.frontier.entries(run.run_id, list(candidates))
    resend = [
        t.model_copy(update={"again": True})
        for h, t in candidates.items()
        if h in known and not known[h].done and known[h].parent == t.parent
    ]
    fresh = [t for h, t in candidates.items() if h not in known]
    claims = services.frontier.claim(run.run_id, fresh, seeds=run.seeds, max_pages=spec.follow.max_pages)
    won = claims.won
    if won or resend:
        services.queue.send(spec.name, run.run_id, [*won, *resend])
    claimed = {url_hash(t.url) for t in won}
    for h, task in candidates.items():
        entry = known.get(h)
        owner = entry.parent if entry is not None else (task.parent if h in claimed else None)
        if owner is not None:
            cache.remember(h, owner)
    return claims

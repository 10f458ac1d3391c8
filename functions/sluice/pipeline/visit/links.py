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
CACHE_CHARS = 16_000_000
"""Links a container remembers per run, and their characters in all (about 40 MB at most): past either, the
links used longest ago are forgotten (each then costs a hash and a lookup again, never a wrong answer)."""

SEEDED = ""
"""The owner :class:`ClaimCache` keeps for a seed: in the run through no page (never one's to send again)."""


def parent_id(page_url: str) -> str:
    """How a claim names the page that made it: the first 16 hex characters of its URL hash."""
    return url_hash(page_url)[:16]


class ClaimCache:
    """Links this container has already seen claimed (or found to be seeds) in a run, with the page that claimed
    them, by canonical URL: a link the run holds costs one dict lookup, no hash, no task.

    Bounded twice (:data:`CACHE_URLS` links, :data:`CACHE_CHARS` characters): a link over the bound is
    forgotten, oldest use first, and is only looked up again."""

    def __init__(self, limit: int = CACHE_URLS, chars: int = CACHE_CHARS) -> None:
        self.limit, self.max_chars = limit, chars
        self.chars = 0
        self._seen: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def settled(self, url: str, parent: str | None) -> bool:
        """True if the link is known to be in the run through another page or as a seed (nothing to send)."""
        owner = self._seen.get(url)
        if owner is None:
            return False
        self._seen.move_to_end(url)
        return owner != parent

    def known(self, url: str) -> bool:
        """True if the link is known to be in the run (claimed by any page, or a seed)."""
        return url in self._seen

    def remember(self, url: str, owner: str) -> None:
        """The link is in the run, claimed by the page ``owner`` names (:data:`SEEDED`: a seed)."""
        if url not in self._seen:
            self.chars += len(url)
        self._seen[url] = owner
        self._seen.move_to_end(url)
        while self._seen and (len(self._seen) > self.limit or self.chars > self.max_chars):
            gone, _ = self._seen.popitem(last=False)
            self.chars -= len(gone)


@dataclass(frozen=True, slots=True)
class FoundLinks:
    """The links a page found, to claim: plain canonical URLs (each once, each short enough for a task), and what
    makes each one's task. Most links of a page are in the run already (a sidebar every page shares), so the task
    a claim writes and sends (:meth:`task`) is made only for a link the run is not known to hold."""

    urls: list[str]
    depth: int
    """The links' depth: one hop past the page's."""
    parent: str
    """The page, as a claim names it (:func:`parent_id`)."""
    rules: Mapping[str, str] = field(default_factory=dict)
    """The follow rule of each link a page type's rule found."""
    carried: Mapping[str, CarriedData] = field(default_factory=dict)
    """The fields each link carries."""

    def __len__(self) -> int:
        return len(self.urls)

    def task(self, url: str) -> UrlTask:
        """The link's task, as its claim writes it and its message carries it."""
        return UrlTask(
            url=url,
            depth=self.depth,
            origin="link",
            parent=self.parent,
            via=self.rules.get(url),
            carry=self.carried.get(url),
        )


@dataclass(frozen=True, slots=True)
class Children:
    """A page's links, as the run takes them."""

    links: FoundLinks | None
    """The links to claim, one hop further (None: none, or the page is at ``follow.max_depth``)."""
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
    """The page's links one hop further, unless the page is at ``follow.max_depth``.

    ``rules`` names the follow rule of each link a page type's rule found, ``carried`` the data each
    link carries: a task holds both. A link is claimed once, so a page two pages link to keeps the
    data of the claim that won (the first)."""
    unique = list(dict.fromkeys(links))
    if page.depth >= spec.follow.depth_limit:
        return Children(None, 0, unique)
    fit = [link for link in unique if len(link) <= MAX_URL]
    found = FoundLinks(fit, page.depth + 1, parent_id(page.url), rules or {}, carried or {}) if fit else None
    return Children(found, len(unique) - len(fit), [])


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
        if not cache.known(link) and url_hash(link) not in seeds:
            left += 1
    return left


def claim_links(
    services: Services, run: RunState, spec: CrawlSpec, found: Sequence[FoundLinks], seeds: SeedSet, cache: ClaimCache
) -> Claims:
    """Claim and send a batch's links: the ones this call claimed (what ``enqueued`` grows by), and the new
    ones ``max_pages`` left out.

    A link the cache knows costs a lookup; only the others are hashed (a seed is remembered as one), and only
    those the run may not hold become tasks."""
    candidates: dict[str, tuple[str, FoundLinks]] = {}
    for links in found:
        parent = links.parent
        for url in links.urls:
            if url in candidates or cache.settled(url, parent):
                continue
            h = url_hash(url)
            if h in seeds:
                cache.remember(url, SEEDED)
                continue
            candidates[url] = (h, links)
    if not candidates:
        return Claims()
    known = services.frontier.entries(run.run_id, [h for h, _ in candidates.values()])
    resend: list[UrlTask] = []
    fresh: list[UrlTask] = []
    for url, (h, links) in candidates.items():
        entry = known.get(h)
        if entry is None:
            fresh.append(links.task(url))
        elif not entry.done and entry.parent == links.parent:
            resend.append(links.task(url).model_copy(update={"again": True}))
    claims = services.frontier.claim(run.run_id, fresh, seeds=run.seeds, max_pages=spec.follow.max_pages)
    won = claims.won
    if won or resend:
        services.queue.send(spec.name, run.run_id, [*won, *resend])
    claimed = {t.url for t in won}
    for url, (h, links) in candidates.items():
        entry = known.get(h)
        owner = entry.parent if entry is not None else (links.parent if url in claimed else None)
        if owner is not None:
            cache.remember(url, owner)
    return claims

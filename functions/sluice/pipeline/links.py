"""Links found on a page, into the run: deduplicated before they cost a write, claimed once, sent.

One rule re-sends: a link whose claim belongs to this page and is still waiting is sent again,
whichever visit of the page this is. A duplicate message is harmless (a URL's result is written
once); a lost one is not. Seeds are never claimed (the run's seed set says which URLs are seeds).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sluice.domain.pages import MAX_URL, url_hash
from sluice.domain.runs import RunState
from sluice.domain.seedset import SeedSet
from sluice.messages import UrlTask
from sluice.pipeline.services import Services
from sluice.spec import CrawlSpec

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

    def remember(self, hash_: str, owner: str) -> None:
        self._seen[hash_] = owner
        self._seen.move_to_end(hash_)
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)


def children(page: UrlTask, links: Iterable[str], spec: CrawlSpec) -> tuple[list[UrlTask], int]:
    """The page's links as tasks one hop further (if the page is not at ``follow.max_depth``), and how many
    were dropped for being longer than a task takes: a link that cannot be queued never fails its page."""
    if page.depth >= spec.follow.max_depth:
        return [], 0
    parent = parent_id(page.url)
    unique = list(dict.fromkeys(links))
    fit = [link for link in unique if len(link) <= MAX_URL]
    tasks = [UrlTask(url=link, depth=page.depth + 1, origin="link", parent=parent) for link in fit]
    return tasks, len(unique) - len(fit)


def claim_links(
    services: Services, run: RunState, spec: CrawlSpec, found: Sequence[UrlTask], seeds: SeedSet, cache: ClaimCache
) -> int:
    """Claim and send a batch's links; return how many this call claimed (what ``enqueued`` grows by)."""
    candidates: dict[str, UrlTask] = {}
    for task in found:
        h = url_hash(task.url)
        if h in candidates or h in seeds or cache.settled(h, task.parent):
            continue
        candidates[h] = task
    if not candidates:
        return 0
    known = services.frontier.entries(run.run_id, list(candidates))
    resend = [
        t.model_copy(update={"again": True})
        for h, t in candidates.items()
        if h in known and not known[h].done and known[h].parent == t.parent
    ]
    fresh = [t for h, t in candidates.items() if h not in known]
    won = services.frontier.claim(run.run_id, fresh, seeds=run.seeds, max_pages=spec.follow.max_pages)
    if won or resend:
        services.queue.send(spec.name, run.run_id, [*won, *resend])
    claimed = {url_hash(t.url) for t in won}
    for h, task in candidates.items():
        entry = known.get(h)
        owner = entry.parent if entry is not None else (task.parent if h in claimed else None)
        if owner is not None:
            cache.remember(h, owner)
    return len(won)

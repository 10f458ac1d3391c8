"""What a page carries along its links, kept for the pages it links to, and taken up by their batches.

A listing extracted this run carries fields (a card's price) to each page it links to. Its result
keeps that map, by the linked URL's 16-hex prefix: inline (``carried_by_link``) while it fits
:data:`~sluice.domain.pages.MAX_CARRIED_INLINE_BYTES`, else whole as one JSON line at the end of the page's
block in the batch's part (``carried_block``). The part is written once a batch already, before any
result: a listing of 10,000 cards costs no new write and no item near DynamoDB's 400 KB, and no
link is left out.

A page seeded from the catalog with carried data takes its linking page's data of this run: from
its own batch, else from that page's result (one strongly consistent ``Query`` a listing, as
before) and, for a map in a part, one ranged GET a listing (a container keeps the last maps it
read). A page whose linking page could not give it this run's data (not visited yet, failed, not
read, its map unreadable) keeps the catalog's carried values, is marked ``carry_stale`` and
counted in the summary and the verdict's ``carry_stale`` check. A linking page this run did not
extract because it had not changed (a 304, the same body, not due) carries what it carried then:
nothing is stale.
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from sluice.domain.errors import StoreError
from sluice.domain.layout import part_key
from sluice.domain.pages import MAX_CARRIED_INLINE_BYTES, PageResult, PartBlock
from sluice.messages import UrlTask
from sluice.observability import logger
from sluice.pipeline.services import Services
from sluice.pipeline.visit.links import CarriedData, parent_id

READERS = 8
"""Ranged GETs of linking pages' maps in flight at once for one batch."""
CACHED_MAPS = 16
"""Maps of linking pages a container keeps (a listing of 10,000 cards is about 600 KB of JSON)."""

NOT_VISITED = "linking page not visited before it (or not in the run)"
FAILED = "linking page failed"
NOT_READ = "linking page not read"
UNREADABLE = "carried data unreadable"

CarriedByLink = Mapping[str, Mapping[str, Any]]


def by_link(carried: Mapping[str, CarriedData]) -> dict[str, CarriedData]:
    """What a page carried along its links, by the linked URL's hash prefix (how a claim names its parent)."""
    return {parent_id(link): data for link, data in carried.items()}


def keep_carried(result: PageResult, part_id: str, body: bytearray) -> PageResult:
    """``result`` with its carried-by-link map kept: inline when it fits, else appended to the part's ``body``
    as one JSON line that ``carried_block`` points at."""
    if not result.carried_by_link:
        return result
    data = json.dumps(result.carried_by_link, separators=(",", ":")).encode()
    if len(data) <= MAX_CARRIED_INLINE_BYTES:
        return result
    start = len(body)
    body += data + b"\n"
    return replace(result, carried_by_link=None, carried_block=PartBlock(part_id, start, len(data)))


@dataclass
class MapCache:
    """The carried-by-link maps a container read from parts, the last :data:`CACHED_MAPS` of them."""

    limit: int = CACHED_MAPS
    _maps: OrderedDict[tuple[str, str, int], CarriedByLink] = field(default_factory=OrderedDict)

    def get(self, key: tuple[str, str, int]) -> CarriedByLink | None:
        found = self._maps.get(key)
        if found is not None:
            self._maps.move_to_end(key)
        return found

    def put(self, key: tuple[str, str, int], carried_by_link: CarriedByLink) -> None:
        self._maps[key] = carried_by_link
        while len(self._maps) > self.limit:
            self._maps.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Refreshed:
    """A batch's pages seeded with carried data, each with its linking page's data of this run where it had it."""

    tasks: list[UrlTask]
    """In the order given; a task whose data changed carries the new data, and no prior that a 304 could keep."""
    stale: dict[str, str]
    """URL -> why its carried data could not be refreshed (the page keeps the catalog's)."""
    refreshed: int


def refresh(
    services: Services,
    crawl: str,
    run_id: str,
    tasks: Sequence[UrlTask],
    in_batch: Mapping[str, PageResult],
    cache: MapCache,
) -> Refreshed:
    """Each task with what its linking page carried to it this run: from ``in_batch`` (results of this batch, by
    16-hex prefix), else from the page's result read back, inline or from its part."""
    wanted = sorted({t.parent for t in tasks if t.parent is not None and t.parent not in in_batch})
    results = dict(in_batch)
    unread = False
    if wanted:
        try:
            found = services.frontier.by_prefix(run_id, wanted)
        except StoreError as exc:  # the catalog's data stands, counted stale
            logger.warning("linking pages not read", extra={"run_id": run_id, "pages": len(wanted), "error": repr(exc)})
            found, unread = {}, True
        results |= {p: e.result for p, e in found.items() if e.result is not None}
    carried_by_link, unreadable = _maps(services, crawl, run_id, results, cache)
    out: list[UrlTask] = []
    stale: dict[str, str] = {}
    refreshed = 0
    for task in tasks:
        parent = task.parent or ""
        linking = results.get(parent)
        why = _stale(linking, parent in unreadable, unread)
        fresh = (carried_by_link.get(parent) or {}).get(parent_id(task.url))
        if why is not None:
            stale[task.url] = why
        elif fresh is not None and dict(fresh) != task.carry:
            # Its records are rebuilt with the new data: no 304 or same body may carry the old ones.
            prior = task.prior.model_copy(update={"c": False}) if task.prior is not None else None
            task = task.model_copy(update={"carry": dict(fresh), "prior": prior})
            refreshed += 1
        out.append(task)
    if stale:
        reasons = Counter(stale.values())
        logger.warning(
            "carried data not refreshed", extra={"run_id": run_id, "pages": len(stale), "reasons": dict(reasons)}
        )
    return Refreshed(out, stale, refreshed)


def _stale(linking: PageResult | None, unreadable: bool, unread: bool) -> str | None:
    """Why a page cannot take its linking page's data of this run, or None (it took it, or there is none newer)."""
    if linking is None:
        return NOT_READ if unread else NOT_VISITED
    if linking.outcome in ("failed", "skipped"):
        return FAILED
    return UNREADABLE if unreadable else None


def _maps(
    services: Services, crawl: str, run_id: str, results: Mapping[str, PageResult], cache: MapCache
) -> tuple[dict[str, CarriedByLink], set[str]]:
    """Every linking page's map, by its prefix: inline, cached, or read from its part (one ranged GET each);
    the prefixes whose map could not be read."""
    carried_by_link: dict[str, CarriedByLink] = {p: r.carried_by_link for p, r in results.items() if r.carried_by_link}
    blocks = {p: r.carried_block for p, r in results.items() if r.carried_block is not None and not r.carried_by_link}
    todo: list[tuple[str, tuple[str, str, int], PartBlock]] = []
    for prefix, block in blocks.items():
        key = (run_id, block.part, block.offset)
        cached = cache.get(key)
        if cached is not None:
            carried_by_link[prefix] = cached
        else:
            todo.append((prefix, key, block))

    def read(block: PartBlock) -> CarriedByLink | str:
        try:
            data = services.objects.get_range(part_key(crawl, run_id, block.part), block.offset, block.length)
            loaded = json.loads(data)
        except (StoreError, ValueError) as exc:  # not read, or not JSON: the page keeps the catalog's data, stale
            return repr(exc)
        return loaded if isinstance(loaded, dict) else f"not a map: {type(loaded).__name__}"

    unreadable: set[str] = set()
    if todo:
        with ThreadPoolExecutor(max_workers=min(READERS, len(todo))) as pool:
            for (prefix, key, _), got in zip(todo, pool.map(read, [b for _, _, b in todo]), strict=True):
                if isinstance(got, str):
                    logger.warning("carried data unreadable", extra={"run_id": run_id, "page": prefix, "error": got})
                    unreadable.add(prefix)
                    continue
                cache.put(key, got)
                carried_by_link[prefix] = got
    return carried_by_link, unreadable


def mark_stale(result: PageResult, stale: Mapping[str, str]) -> PageResult:
    """A page's result marked ``carry_stale`` when its records keep carried data this run could not refresh."""
    if result.url in stale and result.holds_records and result.records:
        return replace(result, carry_stale=True)
    return result

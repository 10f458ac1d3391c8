"""Every attribute the ledger and records tables hold, and how each stored item kind is encoded and decoded.

One module names them all, so no two can collide unseen: a URL item holds its result's codes beside its own
status and expiry, and :data:`URL_ITEM_NAMES` and :data:`RESULT_NAMES` are checked disjoint by the tests.
Names are short where an item is written per page: DynamoDB bills attribute names as item bytes.

The values are plain Python (``items.to_item`` types them for DynamoDB). The local store keeps a result as
the same plain mapping in JSON (:func:`result_plain`), so both stores read one encoding; this module
imports nothing of botocore, so the local adapter and the CDK app (``infra/storage.py`` reads
:data:`EXPIRES`, :data:`PK` and :data:`SK`) may import it. The key attributes and their values' formats
are ``keys.py``'s, named here again so that this module lists every attribute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sluice.adapters.aws import keys
from sluice.adapters.aws.sizes import item_bytes
from sluice.domain.hosts import HostState
from sluice.domain.pages import (
    ArchiveRef,
    Outcome,
    PageResult,
    PartBlock,
    RecordCounts,
    UrlEntry,
    result_of_values,
)
from sluice.domain.runs import Progress, RunLock, RunState

if TYPE_CHECKING:  # used as types only: the CDK app imports this module for EXPIRES
    from sluice.extraction.extract import Record
    from sluice.messages import UrlTask

PK, SK = keys.PK, keys.SK
EXPIRES = "t"
"""The ledger table's time-to-live attribute (epoch seconds): URL, host and finalize-phase items expire by it."""

# -- a URL of a run: claimed (a link) or done (its result); keys.url ----------------------------------------------

STATE = "s"
"""``q`` claimed and waiting, ``d`` done (its result is in the item)."""
QUEUED, DONE = "q", "d"
URL, DEPTH, ORIGIN, PARENT, VIA, CARRY = "u", "d", "g", "p", "v", "ca"
"""Shared by a claim and a result: a claim's link, kept when its result replaces it."""
URL_ITEM_NAMES = frozenset({PK, SK, STATE, EXPIRES})
"""The URL item's own attributes, beside its result's."""

RESULT_NAMES: dict[str, str] = {
    URL: "url",
    DEPTH: "depth",
    ORIGIN: "origin (s seed, l link)",
    "o": "outcome (_OUTCOME_CODE)",
    "r": "reason",
    "h": "status",
    "e": "etag",
    "l": "last_modified",
    "b": "body_hash",
    "k": "digests (bytes)",
    "m": "missing",
    "j": "rejected",
    "c": "[new, changed, unchanged, items]",
    "w": "block [part, offset, length]",
    "y": "reused",  # "y", as items written before the rename have it
    "ms": "ms",
    "z": "dropped_links",
    "fk": "fallback_keys",
    "cp": "capped_links",
    "bd": "beyond_depth",
    "ft": "fetched_at",
    "ty": "type",
    VIA: "via",
    CARRY: "carry",
    PARENT: "parent",
    "kc": "carried_by_link",
    "kw": "carried_block [part, offset, length]",
    "cs": "carry_stale",
    "cd": "carry_dropped",
    "iv": "interval",
    "a": "archive (ArchiveRef text)",
    "px": "[proxy, proxy_tier]",
    "pf": "proxy_failures [[name, reason, ejected]]",
}
"""A result's attributes, code to field: what :func:`result_plain` writes and :func:`result_from_plain` reads."""
DIGESTS = "k"
"""The one binary attribute of a result (JSON stores keep it as base64)."""

_OUTCOME_CODE: dict[Outcome, str] = {
    "fetched": "f",
    "not_modified": "n",
    "not_due": "d",
    "failed": "e",
    "skipped": "k",
}
_CODE_OUTCOME: dict[str, Outcome] = {v: k for k, v in _OUTCOME_CODE.items()}


def result_plain(result: PageResult) -> dict[str, Any]:
    """A result as plain values under :data:`RESULT_NAMES`; empty and default fields are left out."""
    plain: dict[str, Any] = {
        URL: result.url,
        DEPTH: result.depth,
        ORIGIN: result.origin[0],
        "o": _OUTCOME_CODE[result.outcome],
    }
    optional: dict[str, Any] = {
        "r": result.reason,
        "h": result.status,
        "e": result.etag,
        "l": result.last_modified,
        "b": result.body_hash,
        "k": result.digests,
        "m": dict(result.missing),
        "j": dict(result.rejected),
    }
    plain |= {k: v for k, v in optional.items() if v}
    counts = [result.counts.new, result.counts.changed, result.counts.unchanged, result.items]
    if any(counts):
        plain["c"] = counts
    if result.block is not None:
        plain["w"] = [result.block.part, result.block.offset, result.block.length]
    if result.reused:
        plain["y"] = True
    numbers = {
        "ms": result.ms,
        "z": result.dropped_links,
        "fk": result.fallback_keys,
        "cp": result.capped_links,
        "bd": result.beyond_depth,
    }
    plain |= {k: v for k, v in numbers.items() if v}
    present = {"ft": result.fetched_at, "ty": result.type, VIA: result.via}
    plain |= {k: v for k, v in present.items() if v is not None}
    if result.carry:
        plain[CARRY] = dict(result.carry)
    if result.parent is not None:
        plain[PARENT] = result.parent  # as a claim names it: the item keeps its parent once counted
    if result.carried_by_link:
        plain["kc"] = {k: dict(v) for k, v in result.carried_by_link.items()}
    if result.carried_block is not None:
        plain["kw"] = [result.carried_block.part, result.carried_block.offset, result.carried_block.length]
    if result.carry_stale:
        plain["cs"] = True
    if result.carry_dropped:
        plain["cd"] = dict(result.carry_dropped)
    if result.interval is not None:
        plain["iv"] = result.interval
    if result.archive is not None:
        plain["a"] = result.archive.to_text()
    if result.proxy is not None:
        plain["px"] = [result.proxy, result.proxy_tier]
    if result.proxy_failures:
        plain["pf"] = [[name, reason, int(ejected)] for name, reason, ejected in result.proxy_failures]
    return plain


def result_from_plain(plain: Mapping[str, Any]) -> PageResult:
    """A result from :func:`result_plain`'s mapping (other attributes of its item are ignored).

    Its fields by position, in ``PageResult``'s order, built by :func:`result_of_values`: both stores' reads, and
    the finalizer's scan (one a URL), take this path."""
    get = plain.get
    counts = get("c")
    if counts:
        new, changed, unchanged, items = (int(n) for n in counts)
        record_counts = RecordCounts(new, changed, unchanged)
    else:
        record_counts, items = _NO_RECORDS, 0
    proxy = get("px")
    failures = get("pf")
    archive = get("a")
    missing, rejected, dropped = get("m"), get("j"), get("cd")
    return result_of_values(
        (
            plain[URL],  # url
            int(plain[DEPTH]),  # depth
            "seed" if plain[ORIGIN] == "s" else "link",  # origin
            _CODE_OUTCOME[plain["o"]],  # outcome
            get("r"),  # reason
            _int_or_none(get("h")),  # status
            get("e"),  # etag
            get("l"),  # last_modified
            get("b"),  # body_hash
            record_counts,  # counts
            items,  # items
            _counts(missing) if missing else {},  # missing
            _counts(rejected) if rejected else {},  # rejected
            bytes(get("k") or b""),  # digests
            _block(get("w")),  # block
            bool(get("y", False)),  # reused
            int(get("ms", 0)),  # ms
            int(get("z", 0)),  # dropped_links
            int(get("fk", 0)),  # fallback_keys
            int(get("cp", 0)),  # capped_links
            int(get("bd", 0)),  # beyond_depth
            _int_or_none(get("ft")),  # fetched_at
            get("ty"),  # type
            get(VIA),  # via
            get(CARRY) or None,  # carry
            get(PARENT),  # parent
            get("kc") or None,  # carried_by_link
            _block(get("kw")),  # carried_block
            bool(get("cs", False)),  # carry_stale
            _counts(dropped) if dropped else {},  # carry_dropped
            _int_or_none(get("iv")),  # interval
            ArchiveRef.from_text(archive) if archive else None,  # archive
            str(proxy[0]) if proxy else None,  # proxy
            int(proxy[1]) if proxy and proxy[1] is not None else None,  # proxy_tier
            tuple((str(n), str(r), bool(int(e))) for n, r, e in failures) if failures else (),  # proxy_failures
        )
    )


_NO_RECORDS = RecordCounts()
"""A result's counts when it holds none (frozen: one shared)."""


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def _counts(value: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: int(v) for k, v in (value or {}).items()}


def _block(value: Any) -> PartBlock | None:
    return PartBlock(str(value[0]), int(value[1]), int(value[2])) if value else None


def link_plain(task: UrlTask) -> dict[str, Any]:
    """What a claim keeps of its link besides URL, depth and parent: the follow rule and the carried fields."""
    return {k: v for k, v in ((VIA, task.via), (CARRY, task.carry)) if v}


def claim_item(run_id: str, url_hash: str, task: UrlTask, expires: int) -> dict[str, Any]:
    """A link claimed for a run, waiting for its result."""
    item = {**keys.url(run_id, url_hash), URL: task.url, DEPTH: task.depth, ORIGIN: "l", STATE: QUEUED}
    return item | {EXPIRES: expires} | ({PARENT: task.parent} if task.parent else {}) | link_plain(task)


def result_item(run_id: str, url_hash: str, result: PageResult, expires: int) -> dict[str, Any]:
    """A URL done: its result, replacing its claim (a link) or creating its item (a seed)."""
    return {**keys.url(run_id, url_hash), **result_plain(result), STATE: DONE, EXPIRES: expires}


def url_entry(item: Mapping[str, Any]) -> UrlEntry:
    """A URL item (plain values) as the frontier gives it: claimed, or done with its result."""
    return UrlEntry(
        url_hash=item[SK],
        url=item[URL],
        depth=int(item[DEPTH]),
        origin="seed" if item[ORIGIN] == "s" else "link",
        parent=item.get(PARENT),
        result=result_from_plain(item) if item.get(STATE) == DONE else None,
        via=item.get(VIA),
        carry=item.get(CARRY) or None,
    )


def stored_bytes(run_id: str, entry: UrlEntry) -> int:
    """The entry's URL item's size as DynamoDB counts it, its claim's or its result's (the expiry taken as ten
    significant digits). Sized in two parts, the item's own attributes and the rest, which share no name."""
    own = own_bytes(run_id, entry.url_hash)
    if entry.result is not None:
        return own + item_bytes(result_plain(entry.result))
    link = {k: v for k, v in ((PARENT, entry.parent), (VIA, entry.via), (CARRY, entry.carry)) if v}
    return own + item_bytes({URL: entry.url, DEPTH: entry.depth, ORIGIN: "l"} | link)


def own_bytes(run_id: str, url_hash: str) -> int:
    """The URL item's own attributes' share of :func:`stored_bytes` (keys, state, expiry): the same for every
    hash of the run of the same length and first digit (its partition)."""
    return item_bytes({**keys.url(run_id, url_hash), STATE: DONE, EXPIRES: _EXPIRY_AS_SIZED})


_EXPIRY_AS_SIZED = 1_799_999_999


# -- a run's progress shards: keys.progress -------------------------------------------------------------------

PROGRESS_COUNTS = ("claimed", "done", "records", "failed")
"""A progress shard's counters, named as :class:`~sluice.domain.runs.Progress`'s fields."""


def progress_add(delta: Progress) -> tuple[str, dict[str, Any]]:
    """The update expression and values that add ``delta`` to a progress shard."""
    expression = "ADD " + ", ".join(f"{name} :{name}" for name in PROGRESS_COUNTS)
    return expression, {f":{name}": getattr(delta, name) for name in PROGRESS_COUNTS}


def progress_of(item: Mapping[str, Any]) -> Progress:
    return Progress(*(int(item.get(name, 0)) for name in PROGRESS_COUNTS))


# -- a host: keys.host ------------------------------------------------------------------------------------------

HOST, HOST_STATE, HOST_VERSION = "host", "s", "v"
"""The host's name, its state as compact JSON (``HostState.to_json``) and the version the condition checks."""


def host_item(state: HostState, expires: int) -> dict[str, Any]:
    """A host's state as written (``state.version`` is the one being written)."""
    return {
        **keys.host(state.host),
        HOST: state.host,
        HOST_STATE: json.dumps(state.to_json(), separators=(",", ":")),
        HOST_VERSION: state.version,
        EXPIRES: expires,
    }


def host_state(item: Mapping[str, Any]) -> HostState:
    host = str(item[HOST])
    return HostState.from_json(host, json.loads(item[HOST_STATE]))


# -- a run (keys.run) and its crawl's lock (keys.lock) ------------------------------------------------------------

RUN_STATUS, RUN_ID, DEADLINE = "status", "run_id", "deadline"
"""A run item's attributes are :class:`~sluice.domain.runs.RunState`'s field names; these three appear in
conditions."""
_RUN_REQUIRED = ("crawl", RUN_ID, RUN_STATUS, "started_at", DEADLINE, "spec_digest", "seeding", "seeds")
_RUN_NUMBERS = ("seeds", "fanned_out", "checked_done", "records")


def run_item(state: RunState) -> dict[str, Any]:
    """A run as it opens (its later fields are set by :func:`run_update`)."""
    item: dict[str, Any] = {**keys.run(state.crawl, state.run_id)}
    item |= {name: getattr(state, name) for name in _RUN_REQUIRED}
    optional = {"catalog_run": state.catalog_run, "trigger": state.trigger}
    return item | {k: v for k, v in optional.items() if v is not None}


def run_update(changes: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``SET`` of run fields (by :class:`RunState` field name): the expression, its names and its values."""
    unknown = set(changes) - set(RunState.__dataclass_fields__)
    if unknown:
        raise ValueError(f"not fields of a run: {sorted(unknown)}")
    names = {f"#{name}": name for name in changes}
    values = {f":{name}": value for name, value in changes.items()}
    return "SET " + ", ".join(f"#{name} = :{name}" for name in changes), names, values


def run_state(item: Mapping[str, Any]) -> RunState:
    values: dict[str, Any] = {name: item[name] for name in RunState.__dataclass_fields__ if name in item}
    values |= {name: int(values[name]) for name in _RUN_NUMBERS if values.get(name) is not None}
    values["seeding"] = bool(values.get("seeding", False))
    return RunState(**values)


def lock_item(lock: RunLock) -> dict[str, Any]:
    item = {**keys.lock(lock.crawl), RUN_ID: lock.run_id, "started_at": lock.started_at, DEADLINE: lock.deadline}
    return item | ({"trigger": lock.trigger} if lock.trigger else {})


def run_lock(item: Mapping[str, Any]) -> RunLock:
    return RunLock(
        crawl=item[SK],
        run_id=item[RUN_ID],
        started_at=item["started_at"],
        deadline=item[DEADLINE],
        trigger=item.get("trigger"),
    )


# -- a finalize phase's shards done: keys.finalize_phase ------------------------------------------------------------

PHASE_DONE, PHASE_MOVED = "done", "moved"
"""The number set of shards done, and the flag set once the phase is moved on."""

# -- the records table: keys.record ------------------------------------------------------------------------------


def record_item(crawl: str, run_id: str, record: Record) -> dict[str, Any]:
    """A record's current content (what ``RecordsTable.get`` gives back, with the key attributes)."""
    return {
        **keys.record(crawl, record.identity),
        "record_key": record.key,
        **({"record_type": record.type} if record.type is not None else {}),
        "content_hash": record.content_hash,
        "data": json.dumps(record.data, ensure_ascii=False, sort_keys=True),
        "run_id": run_id,
        "page": record.page_url,
    }

"""The three shard tasks of a finalizing attempt, and the objects they hand on to each other.

A run's URL keyspace is split into ``count`` shards (``sluice.domain.shards``); each task works on
one shard and writes its result as objects under the attempt's work prefix, rewritten whole when
the task is retried, so a shard that dies and runs again is never counted twice: the steps that
follow read exactly one result per shard.

1. **scan** (URL shard ``s``): read the shard's URL entries (the run's first scan): its tally and
   usage, its output plan (the blocks to copy, carried pages found in the catalog run's index),
   and its record-key digests by key section: this run's output keys with the place of their
   first copy, and both runs' keys for ``records.gone``. Writes ``scan-S.json`` and ``scan-S.bin``.
2. **keys** (key section ``k``): every shard's digests of section ``k``: which keys two shards
   hold (the shard with the first copy keeps it, the others are told to drop it), and how many
   catalog records this run lacks. It also counts URL shard ``k`` again (the run's second scan:
   an unchanged count proves nothing moved). Writes ``keys-K.json`` and ``keys-K.bin``.
3. **write** (URL shard ``s``): the shard's records files and page-index rows, from its plan less
   the keys it drops. Writes ``write-S.json`` and ``write-S.index``.

The combine step (``sluice.pipeline.finalize``) reads the results and writes the run's index,
manifest and summary. Memory per task is its shard's: about 40,000 pages at the default size.
"""

from __future__ import annotations

import json
import struct
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from sluice.domain import churn, tally
from sluice.domain.layout import finalize_prefix, records_prefix, work_prefix
from sluice.domain.pages import DIGEST_BYTES
from sluice.domain.runs import RunState
from sluice.domain.shards import Shard
from sluice.pipeline.output import (
    POSITION_BYTES,
    OutputPlan,
    Reading,
    _Block,
    first_positions,
    write_shard,
)
from sluice.pipeline.services import Services
from sluice.pipeline.usage import UsageCounter
from sluice.ports import ObjectStore
from sluice.spec import CrawlSpec

SCAN, KEYS, WRITE = "scan", "keys", "write"
PHASES = (SCAN, KEYS, WRITE)
_SCAN_MAGIC, _KEYS_MAGIC = b"SLSCAN01", b"SLKEYS01"
_SPAN = struct.Struct("<QQ")  # offset, length of a section
_COUNT = struct.Struct("<I")
_ROW = struct.Struct("<QIQII")  # URL number, source index, offset, length, digest bytes
_OUTPUT_KEY = struct.Struct(f">Q{POSITION_BYTES}s")  # key digest, place of its first copy
_DIGEST = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One finalizing attempt of a run: its id (its objects' prefix), shard count and how it was asked for."""

    crawl: str
    run_id: str
    attempt: str
    count: int
    force: bool = False
    """Finalized as it stands (overdue, stopped, or finalizing again): no drained check."""
    stopped: str | None = None
    swept: bool = False
    """Asked for by the sweep: a run counted the same as last time is stalled, and its waiting links are sent again."""

    def as_plain(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> Attempt:
        return cls(
            crawl=str(plain["crawl"]),
            run_id=str(plain["run_id"]),
            attempt=str(plain["attempt"]),
            count=int(plain["count"]),
            force=bool(plain.get("force", False)),
            stopped=plain.get("stopped"),
            swept=bool(plain.get("swept", False)),
        )

    def key(self, phase: str, shard: int, suffix: str) -> str:
        return f"{finalize_prefix(self.crawl, self.run_id, self.attempt)}{phase}-{shard:05d}.{suffix}"

    def shards(self) -> list[Shard]:
        return [Shard(i, self.count) for i in range(self.count)]


def run_task(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt, phase: str, index: int) -> None:
    """Run one shard task; its result objects are written whole (a retry rewrites them)."""
    shard = Shard(index, attempt.count)
    match phase:
        case "scan":
            _scan(services, run, spec, attempt, shard)
        case "keys":
            _keys(services, run, attempt, shard)
        case "write":
            _write(services, run, spec, attempt, shard)
        case _:
            raise ValueError(f"no finalize phase {phase!r} (known: {', '.join(PHASES)})")


# -- scan ------------------------------------------------------------------------------------------------


def _prefixes(run: RunState) -> tuple[str, ...]:
    """What every block's source starts with, in the order the output sorts sources (``runs/`` before ``work/``)."""
    catalog = (records_prefix(run.crawl, run.catalog_run),) if run.catalog_run else ()
    return (*catalog, f"{work_prefix(run.crawl, run.run_id)}parts/")


def _scan(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt, shard: Shard) -> None:
    started = time.monotonic()
    plan = OutputPlan(run.crawl, run.run_id, run.catalog_run, typed=spec.types is not None)
    counted, usage, keys = tally.RunTally(), UsageCounter(run_id=run.run_id), churn.RecordChurn()
    for entry in services.frontier.scan(run.run_id, shard=shard):
        counted.add(entry)
        plan.add(entry)
        usage.add(entry)
        keys.add_after(entry.result)
    if run.catalog_run is not None:
        for entry in services.frontier.scan(run.catalog_run, consistent=False, shard=shard):  # finished: still
            keys.add_before(entry.result)
    blocks, missing = plan.resolve(services.objects, shard)
    first = first_positions(blocks, _prefixes(run))
    output_keys: list[list[tuple[int, bytes]]] = [[] for _ in range(attempt.count)]
    for digest, where in sorted(first.items()):
        output_keys[Shard.of(digest, attempt.count)].append((digest, where))
    after, before = churn.sections(keys.after, attempt.count), churn.sections(keys.before, attempt.count)
    sections = [_plan_bytes(blocks, missing)] + [
        _COUNT.pack(len(out))
        + _COUNT.pack(len(a))
        + b"".join(_OUTPUT_KEY.pack(d, w) for d, w in out)
        + a.tobytes()
        + b.tobytes()
        for out, a, b in zip(output_keys, after, before, strict=True)
    ]
    services.objects.put(attempt.key(SCAN, shard.index, "bin"), _sectioned(_SCAN_MAGIC, sections), _BINARY)
    result = {
        "spans": _spans(_SCAN_MAGIC, sections),
        "tally": tally.to_plain(counted),
        "usage": usage.as_plain(),
        "entries": counted.entries,
        "done": counted.done,
        "unknown_pages": keys.unknown_pages,
        "seconds": round(time.monotonic() - started, 3),
    }
    services.objects.put(attempt.key(SCAN, shard.index, "json"), json.dumps(result).encode(), _JSON)


def _plan_bytes(blocks: list[_Block], missing: int) -> bytes:
    sources: dict[str, int] = {}
    rows = bytearray()
    for block in blocks:
        source = sources.setdefault(block.source, len(sources))
        rows += _ROW.pack(block.number, source, block.offset, block.length, len(block.digests)) + block.digests
    head = json.dumps({"sources": list(sources), "missing": missing}).encode()
    return _COUNT.pack(len(head)) + head + bytes(rows)


def _read_plan(data: bytes) -> tuple[list[_Block], int]:
    (size,) = _COUNT.unpack_from(data)
    head = json.loads(data[_COUNT.size : _COUNT.size + size])
    sources: list[str] = head["sources"]
    blocks, at = [], _COUNT.size + size
    while at < len(data):
        number, source, offset, length, digest_bytes = _ROW.unpack_from(data, at)
        at += _ROW.size
        blocks.append(_Block(number, sources[source], offset, length, data[at : at + digest_bytes]))
        at += digest_bytes
    return blocks, int(head["missing"])


# -- keys ------------------------------------------------------------------------------------------------


def _keys(services: Services, run: RunState, attempt: Attempt, section: Shard) -> None:
    started = time.monotonic()
    holders: dict[int, list[tuple[bytes, int]]] = defaultdict(list)
    after: set[int] = set()
    before: list[int] = []
    row = services.objects.get_range(
        _index_key(attempt, KEYS), section.index * attempt.count * _SPAN.size, attempt.count * _SPAN.size
    )
    for shard in attempt.shards():
        offset, length = _SPAN.unpack_from(row, shard.index * _SPAN.size)
        data = services.objects.get_range(attempt.key(SCAN, shard.index, "bin"), offset, length) if length else b""
        if not data:
            continue
        n_out, n_after = _COUNT.unpack_from(data)[0], _COUNT.unpack_from(data, _COUNT.size)[0]
        at = 2 * _COUNT.size
        for digest, where in _OUTPUT_KEY.iter_unpack(data[at : at + n_out * _OUTPUT_KEY.size]):
            holders[digest].append((where, shard.index))
        at += n_out * _OUTPUT_KEY.size
        after.update(d for (d,) in _DIGEST_LE.iter_unpack(data[at : at + n_after * 8]))
        at += n_after * 8
        before.extend(d for (d,) in _DIGEST_LE.iter_unpack(data[at:]))
    drops: list[list[int]] = [[] for _ in range(attempt.count)]
    for digest, copies in holders.items():
        if len(copies) > 1:
            keeper = min(copies)[1]  # the first copy in the output's order (source, offset), then shard
            for _, shard_index in copies:
                if shard_index != keeper:
                    drops[shard_index].append(digest)
    previous, gone = churn.counts(before, after)
    entries = done = 0
    for entry in services.frontier.scan(run.run_id, shard=section):  # the run's second scan, of URL shard k
        entries += 1
        done += entry.result is not None
    sections = [b"".join(_DIGEST.pack(d) for d in sorted(set(ds))) for ds in drops]
    services.objects.put(attempt.key(KEYS, section.index, "bin"), _sectioned(_KEYS_MAGIC, sections), _BINARY)
    result = {
        "spans": _spans(_KEYS_MAGIC, sections),
        "previous": previous,
        "gone": gone,
        "entries": entries,
        "done": done,
        "shared_keys": sum(1 for copies in holders.values() if len({s for _, s in copies}) > 1),
        "seconds": round(time.monotonic() - started, 3),
    }
    services.objects.put(attempt.key(KEYS, section.index, "json"), json.dumps(result).encode(), _JSON)


# -- write -----------------------------------------------------------------------------------------------


def _write(services: Services, run: RunState, spec: CrawlSpec, attempt: Attempt, shard: Shard) -> None:
    started = time.monotonic()
    objects = services.objects
    blocks, missing = _read_plan(_section(objects, attempt.key(SCAN, shard.index, "bin"), _SCAN_MAGIC, 0))
    drops: set[bytes] = set()
    where = json.loads(objects.get(_index_key(attempt, WRITE)) or b"{}").get(str(shard.index), [])
    for section, offset, length in where:  # only the key sections that tell this shard to drop something
        data = objects.get_range(attempt.key(KEYS, int(section), "bin"), int(offset), int(length))
        drops.update(data[i : i + DIGEST_BYTES] for i in range(0, len(data), DIGEST_BYTES))
    plan = OutputPlan(run.crawl, run.run_id, run.catalog_run, typed=spec.types is not None)
    reading = Reading(services.tuning.output_span_bytes, services.tuning.output_readers)
    written = write_shard(objects, plan, blocks, missing, shard, drops, reading)
    objects.put(attempt.key(WRITE, shard.index, "index"), written.index_rows, _BINARY)
    result = written.as_plain() | {"seconds": round(time.monotonic() - started, 3)}
    objects.put(attempt.key(WRITE, shard.index, "json"), json.dumps(result).encode(), _JSON)


# -- reading results -------------------------------------------------------------------------------------


def results(objects: ObjectStore, attempt: Attempt, phase: str) -> Iterator[dict[str, Any]]:
    """Each shard's result of a phase, in shard order (one per shard, however often the shard ran)."""
    for index in range(attempt.count):
        data = objects.get(attempt.key(phase, index, "json"))
        if data is None:
            raise LookupError(f"finalize attempt {attempt.attempt}: no {phase} result for shard {index}")
        yield json.loads(data)


def index_rows(objects: ObjectStore, attempt: Attempt) -> Iterator[bytes]:
    for index in range(attempt.count):
        yield objects.get(attempt.key(WRITE, index, "index")) or b""


def prepare(objects: ObjectStore, attempt: Attempt, phase: str) -> None:
    """Before a phase starts, one index of where each of its tasks' inputs are in the previous phase's objects.

    A keys task then reads one row of ``keys.index`` (where its section is in every scan object) instead of
    every scan object's head; a write task reads ``write.index`` (which keys objects hold digests it drops,
    and where) instead of every keys object's head: at 256 shards, 65,000 reads a run fewer."""
    if phase == KEYS:
        spans = [result["spans"][1:] for result in results(objects, attempt, SCAN)]  # [shard][section]
        rows = b"".join(_SPAN.pack(*spans[s][k]) for k in range(attempt.count) for s in range(attempt.count))
        objects.put(_index_key(attempt, KEYS), rows, _BINARY)
    elif phase == WRITE:
        where: dict[str, list[list[int]]] = {}
        for section, result in enumerate(results(objects, attempt, KEYS)):
            for shard, (offset, length) in enumerate(result["spans"]):
                if length:
                    where.setdefault(str(shard), []).append([section, offset, length])
        objects.put(_index_key(attempt, WRITE), json.dumps(where).encode(), _JSON)


def _index_key(attempt: Attempt, phase: str) -> str:
    return f"{finalize_prefix(attempt.crawl, attempt.run_id, attempt.attempt)}{phase}.index"


def _spans(magic: bytes, sections: list[bytes]) -> list[list[int]]:
    """Each section's (offset, length) in the object :func:`_sectioned` makes of them."""
    at = len(magic) + _COUNT.size + len(sections) * _SPAN.size
    spans = []
    for section in sections:
        spans.append([at, len(section)])
        at += len(section)
    return spans


_BINARY, _JSON = "application/octet-stream", "application/json"
_DIGEST_LE = struct.Struct("<Q")  # array("Q").tobytes(): the machine's order (little-endian on Lambda and here)


def _sectioned(magic: bytes, sections: list[bytes]) -> bytes:
    """``magic``, the section count, each section's (offset, length), then the sections: one range read each."""
    head = len(magic) + _COUNT.size + len(sections) * _SPAN.size
    spans, at = bytearray(), head
    for section in sections:
        spans += _SPAN.pack(at, len(section))
        at += len(section)
    return magic + _COUNT.pack(len(sections)) + bytes(spans) + b"".join(sections)


def _section(objects: ObjectStore, key: str, magic: bytes, number: int) -> bytes:
    """One section of a :func:`_sectioned` object: two range reads (its place, then its bytes)."""
    span_at = len(magic) + _COUNT.size + number * _SPAN.size
    head = objects.get_range(key, 0, span_at + _SPAN.size)
    if not head.startswith(magic) or len(head) < span_at + _SPAN.size:
        raise LookupError(f"{key}: not a finalize shard result, or written by another shard count")
    offset, length = _SPAN.unpack_from(head, span_at)
    return objects.get_range(key, offset, length) if length else b""

"""A run's output: its records, each key once, copied as whole page blocks into a few large files.

Written per finalize shard (``sluice.domain.shards``): each shard copies the blocks of its own
pages into its own files (``part-SSSSS-NNNNN.jsonl``) and keeps its slice of the page index; the
combine step concatenates the slices (they are in hash order, shard after shard) and writes the
manifest. A key held by pages of two shards is kept by the shard that holds its first copy, in
the order the output has always used (by source, then offset); the others are told to drop it.

Sources are this run's part objects (pages fetched and extracted) and the catalog run's output
(pages reused by a 304 or an identical body), both read in large ranges, never page by page:
a million pages are about 10,000 part reads and a few hundred 8 MB ranges. A page's block is
copied as bytes; only pages holding a record key that another page also holds are read line by
line, and there the first copy written wins (compared by the key itself, not its digest).

``pages.index`` (``sluice.pipeline.finalize.page_index``) says where each page's block landed (25 bytes a page), so the
next run's finalizer can find the records it carries. A block that lost records to another page
is marked partial: the next run fetches that page whole rather than carry an incomplete block.
"""

from __future__ import annotations

import itertools
import json
from array import array
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sluice.domain.layout import index_key, manifest_key, part_key, records_file, records_prefix
from sluice.domain.pages import DIGEST_BYTES, RECORD_DIGEST_BYTES, UrlEntry, digest, key_numbers, url_number
from sluice.domain.shards import Shard
from sluice.extraction.extract import record_identity
from sluice.pipeline.finalize.page_index import (
    _INDEX_MAGIC,
    _INDEX_ROW,
    INDEX_MAGIC,
    INDEX_ROW,
    PageIndex,
    file_number,
    load_index,
    output_block,
    output_files,
)
from sluice.ports import ObjectStore, ObjectWriter

__all__ = [
    "INDEX_MAGIC",
    "INDEX_ROW",
    "OutputPlan",
    "OutputSummary",
    "PageIndex",
    "Reading",
    "ShardOutput",
    "file_number",
    "first_positions",
    "load_index",
    "output_block",
    "output_files",
    "position",
    "write_index_and_manifest",
    "write_shard",
]

FILE_BYTES = 128 * 1024 * 1024
"""Output files roll over at page boundaries past this size (what Athena reads best)."""
POSITION_BYTES = 32
"""A block's place in the output's order, as bytes that sort as ``(source, offset)`` (see :func:`position`)."""
_KEY_START = len('{"_key": ')


@dataclass(slots=True)
class _Block:
    number: int
    source: str
    offset: int
    length: int
    digests: bytes
    exact: bool = False
    """Holds a key another page holds too: copied line by line."""


@dataclass
class OutputPlan:
    """The pages whose records go into the output, gathered while a finalize shard scans its URLs."""

    crawl: str
    run_id: str
    catalog_run: str | None
    typed: bool = False
    """The spec has ``types``: each page's block goes to its type's files (its lines say ``_type``)."""
    blocks: list[_Block] = field(default_factory=list)
    reused: list[tuple[int, bytes]] = field(default_factory=list)

    def add(self, entry: UrlEntry) -> None:
        result = entry.result
        if result is None or not result.holds_records or result.records == 0:
            return
        number = url_number(entry.url_hash)
        if result.block is not None:
            block = result.block
            source = part_key(self.crawl, self.run_id, block.part)
            self.blocks.append(_Block(number, source, block.offset, block.length, result.digests))
        elif result.reused:
            self.reused.append((number, result.digests))

    def resolve(self, objects: ObjectStore, shard: Shard) -> tuple[list[_Block], int]:
        """The shard's blocks, reused pages' found in the catalog run's output; and how many it did not have."""
        blocks = list(self.blocks)
        missing = 0
        if self.reused and self.catalog_run is not None:
            catalog = load_index(objects, self.crawl, self.catalog_run, shard)
            files = output_files(objects, self.crawl, self.catalog_run)
            for number, digests in self.reused:
                where = catalog.find(number)
                if where is None:
                    missing += 1
                    continue
                file, offset, length = where
                source = files.get(file) or records_file(self.crawl, self.catalog_run, file)
                blocks.append(_Block(number, source, offset, length, digests))
        else:
            missing = len(self.reused)
        _digest_unlisted(objects, blocks, typed=self.typed)
        return blocks, missing


@dataclass(frozen=True, slots=True)
class OutputSummary:
    files: list[dict[str, object]]
    records: int
    pages: int
    duplicates: int
    """Records left out because another page of the run had the same key."""
    reused_missing: int
    """Pages reused from the catalog run whose records its output did not have (0 unless it was altered)."""
    bytes: int
    folder: str
    types: dict[str, int] = field(default_factory=dict)
    """Records in the output per page type (a spec with ``types``; empty for a one-type spec)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """How sources are read: ranges of up to ``span_bytes``, ``readers`` of them in flight."""

    span_bytes: int = 8 * 1024 * 1024
    readers: int = 8


@dataclass(frozen=True, slots=True)
class ShardOutput:
    """What one shard wrote: its files and counts (:class:`OutputSummary`'s shape), and its page index rows."""

    index_rows: bytes
    """Sorted by URL number: every row's number is inside the shard's range."""
    files: list[dict[str, object]]
    records: int
    duplicates: int
    reused_missing: int
    bytes: int
    types: dict[str, int]

    def as_plain(self) -> dict[str, object]:
        return {
            "files": self.files,
            "records": self.records,
            "pages": len(self.index_rows) // _INDEX_ROW.size,
            "duplicates": self.duplicates,
            "reused_missing": self.reused_missing,
            "bytes": self.bytes,
            "types": self.types,
        }


def write_shard(
    objects: ObjectStore,
    plan: OutputPlan,
    blocks: list[_Block],
    missing: int,
    shard: Shard,
    drops: set[bytes],
    reading: Reading = Reading(),
) -> ShardOutput:
    """Write one shard's records files: every block of its pages, each key once.

    ``drops`` are key digests whose first copy another shard holds: every line of theirs here is left out.
    """
    shared = _mark_shared_keys(blocks, drops)
    writer = _FilesWriter(objects, plan.crawl, plan.run_id, shared, drops, typed=plan.typed, shard=shard)
    try:
        for block, data in _read_blocks(objects, blocks, reading):
            writer.page(block, data)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return ShardOutput(
        files=writer.files,
        records=writer.records,
        duplicates=writer.duplicates,
        reused_missing=missing,
        bytes=writer.bytes,
        types=dict(sorted(writer.types.items())),
        index_rows=b"".join(_INDEX_ROW.pack(*row) for row in sorted(writer.index)),
    )


def write_index_and_manifest(
    objects: ObjectStore, plan: OutputPlan, shards: list[dict[str, object]], index_parts: Iterable[bytes]
) -> OutputSummary:
    """The run's page index (the shards' rows, shard after shard: hash order) and its manifest."""
    writer = objects.writer(index_key(plan.crawl, plan.run_id), "application/octet-stream")
    try:
        writer.write(_INDEX_MAGIC)
        for rows in index_parts:
            writer.write(rows)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    types: dict[str, int] = {}
    for part in shards:
        for kind, n in dict(part["types"]).items():  # type: ignore[call-overload]
            types[kind] = types.get(kind, 0) + int(n)
    summary = OutputSummary(
        files=[f for part in shards for f in part["files"]],  # type: ignore[attr-defined]
        records=sum(int(part["records"]) for part in shards),  # type: ignore[call-overload]
        pages=sum(int(part["pages"]) for part in shards),  # type: ignore[call-overload]
        duplicates=sum(int(part["duplicates"]) for part in shards),  # type: ignore[call-overload]
        reused_missing=sum(_reused_missing(part) for part in shards),
        bytes=sum(int(part["bytes"]) for part in shards),  # type: ignore[call-overload]
        folder=objects.location(records_prefix(plan.crawl, plan.run_id)),
        types=dict(sorted(types.items())),
    )
    manifest = {
        "crawl": plan.crawl,
        "run_id": plan.run_id,
        "records": summary.records,
        "pages": summary.pages,
        "bytes": summary.bytes,
        "duplicates_dropped": summary.duplicates,
        "reused_missing": summary.reused_missing,
        "files": summary.files,
        "index": index_key(plan.crawl, plan.run_id),
    }
    if plan.typed:
        manifest["types"] = summary.types
    objects.put(manifest_key(plan.crawl, plan.run_id), json.dumps(manifest, indent=2).encode(), "application/json")
    return summary


def _reused_missing(shard: dict[str, object]) -> int:
    """A shard result's reused pages missing from the catalog output (``carried_missing`` before the rename)."""
    return int(str(shard.get("reused_missing", shard.get("carried_missing", 0))))


def position(source: str, offset: int, prefixes: tuple[str, ...]) -> bytes:
    """A block's place in the output's order as :data:`POSITION_BYTES` that sort as ``(source, offset)`` do.

    Every source of a run starts with one of a few prefixes (the catalog run's records folder, this
    run's parts folder), so the prefix's rank and the next 23 bytes of the rest stand for the key:
    exact for a part (its name is a 32-digit uuid: two parts of one run sharing 23 of them never
    happen) and for a catalog file."""
    rank = next((i for i, prefix in enumerate(prefixes) if source.startswith(prefix)), len(prefixes))
    rest = source[len(prefixes[rank]) :].encode() if rank < len(prefixes) else source.encode()
    return bytes([rank]) + rest[:23].ljust(23, b"\0") + offset.to_bytes(8, "big")


def first_positions(blocks: list[_Block], prefixes: tuple[str, ...]) -> dict[int, bytes]:
    """Each key digest the blocks hold (as an integer), with the place of its first copy among them.

    The blocks are taken last to first, each one's keys laid over the ones after it in one C-level
    ``dict.update``: what stays is each key's first copy's place (the dict's order is not the keys' first order,
    and nothing reads it in order)."""
    first: dict[int, bytes] = {}
    for block in reversed(sorted(blocks, key=lambda b: (b.source, b.offset))):
        first.update(dict.fromkeys(key_numbers(block.digests), position(block.source, block.offset, prefixes)))
    return first


def _identity(line: bytes, decoder: json.JSONDecoder, typed: bool) -> tuple[str, str | None]:
    """A record line's key, and its type if the run has types (``_type`` comes after ``_key`` and ``_page``)."""
    if typed:
        record = json.loads(line)
        return record["_key"], record.get("_type")
    key, _ = decoder.raw_decode(line.decode(), _KEY_START)
    return key, None


def _key_digests(packed: bytes) -> Iterator[bytes]:
    for i in range(0, len(packed), RECORD_DIGEST_BYTES):
        yield packed[i : i + DIGEST_BYTES]


def _digest_unlisted(objects: ObjectStore, blocks: list[_Block], *, typed: bool = False) -> None:
    """Key digests for blocks whose result kept none (a page of over 2,000 records), read from the block itself.

    Without them such a page's keys would be invisible to the search for keys two pages share.
    """
    decoder = json.JSONDecoder()
    for block in blocks:
        if block.digests or not block.length:
            continue
        data = objects.get_range(block.source, block.offset, block.length)
        keys = (record_identity(*_identity(line, decoder, typed)) for line in data.splitlines() if line)
        block.digests = b"".join(digest(key) + bytes(DIGEST_BYTES) for key in keys)


def _mark_shared_keys(blocks: list[_Block], drops: set[bytes] = frozenset()) -> set[bytes]:  # type: ignore[assignment]
    """Flag the blocks holding a key digest that more than one record of the shard has, or that another shard
    keeps (``drops``); return those digests.

    Digests are bucketed by their first byte into compact arrays (8 bytes a record), and each
    bucket is sorted on its own, so memory stays near 8 bytes a record with no set of them all.
    """
    buckets: list[array[int]] = [array("Q") for _ in range(256)]
    for block in blocks:
        for key in key_numbers(block.digests):
            buckets[key >> 56].append(key)
    shared: set[bytes] = set()
    for i, bucket in enumerate(buckets):
        if len(set(bucket)) < len(bucket):  # most buckets hold no key twice: nothing to sort and walk
            ordered = sorted(bucket)
            shared.update(a.to_bytes(DIGEST_BYTES, "big") for a, b in itertools.pairwise(ordered) if a == b)
        buckets[i] = array("Q")  # each bucket's memory goes as soon as it is sorted
    shared |= drops
    if not shared:
        return shared
    for block in blocks:
        block.exact = any(key in shared for key in _key_digests(block.digests))
    return shared


def _read_blocks(objects: ObjectStore, blocks: list[_Block], reading: Reading) -> Iterator[tuple[_Block, bytes]]:
    """Every block's bytes, read in coalesced ranges, a bounded number in flight."""
    spans = list(_spans(sorted(blocks, key=lambda b: (b.source, b.offset)), reading.span_bytes))

    def read(span: list[_Block]) -> bytes:
        start = span[0].offset
        return objects.get_range(span[0].source, start, span[-1].offset + span[-1].length - start)

    with ThreadPoolExecutor(max_workers=reading.readers) as pool:
        for start in range(0, len(spans), reading.readers):
            window = spans[start : start + reading.readers]
            for span, data in zip(window, pool.map(read, window), strict=True):
                base = span[0].offset
                for block in span:
                    yield block, data[block.offset - base : block.offset - base + block.length]


def _spans(blocks: Iterable[_Block], span_bytes: int) -> Iterator[list[_Block]]:
    span: list[_Block] = []
    for block in blocks:
        if span and (
            block.source != span[0].source
            or block.offset + block.length - span[0].offset > span_bytes
            or block.offset < span[-1].offset + span[-1].length
        ):
            yield span
            span = []
        span.append(block)
    if span:
        yield span


class _FilesWriter:
    """``records/part-NNNNN.jsonl`` files, rolled over at page boundaries; the index of where pages went."""

    def __init__(
        self,
        objects: ObjectStore,
        crawl: str,
        run_id: str,
        shared: set[bytes],
        drops: set[bytes],
        *,
        typed: bool,
        shard: Shard,
    ) -> None:
        self.objects, self.crawl, self.run_id, self.typed = objects, crawl, run_id, typed
        self._base = shard.index << 16
        """The shard's files are numbered ``SSSSS << 16 | n``: their names say ``part-SSSSS-NNNNN``."""
        self._drops = drops
        """Key digests another shard keeps the first copy of: never written here."""
        self.types: dict[str, int] = {}
        self._open: dict[str | None, tuple[int, ObjectWriter]] = {}
        """The file being written per type (one-type: under None), with its number."""
        self._shared = shared
        """Key digests more than one record has: only such keys are remembered (memory stays with them)."""
        self.files: list[dict[str, object]] = []
        self.index: list[tuple[int, int, int, int, int]] = []
        self.records = self.duplicates = self.bytes = 0
        self._file_records: dict[int, int] = {}
        self._emitted: set[str] = set()
        self._decoder = json.JSONDecoder()

    def page(self, block: _Block, data: bytes) -> None:
        dropped = 0
        if block.exact:
            data, kept, dropped = self._filter(data)
            self.duplicates += dropped
        else:
            kept = data.count(b"\n")
        if not data:
            return
        type_ = _identity(data[: data.index(b"\n") + 1], self._decoder, True)[1] if self.typed else None
        number, writer = self._writer(type_)
        self.index.append((block.number, number, writer.size, len(data), int(dropped > 0)))
        writer.write(data)
        self.records += kept
        if type_ is not None:
            self.types[type_] = self.types.get(type_, 0) + kept
        self._file_records[number] += kept
        self.bytes += len(data)
        if writer.size >= FILE_BYTES:
            self._roll(type_)

    def _filter(self, data: bytes) -> tuple[bytes, int, int]:
        """A block's lines less those whose key was already written (first copy wins)."""
        decoder = json.JSONDecoder()
        kept_lines = []
        dropped = 0
        for line in data.splitlines(keepends=True):
            key = record_identity(*_identity(line, decoder, self.typed))
            key_digest = digest(key)
            if key_digest in self._drops:
                dropped += 1
                continue
            if key_digest in self._shared:
                if key in self._emitted:
                    dropped += 1
                    continue
                self._emitted.add(key)
            kept_lines.append(line)
        return b"".join(kept_lines), len(kept_lines), dropped

    def _writer(self, type_: str | None) -> tuple[int, ObjectWriter]:
        if type_ not in self._open:
            # Numbered across types in the order files open: a page index row's file number names one file.
            number = self._base + len(self.files) + len(self._open)
            key = records_file(self.crawl, self.run_id, number, type_)
            self._open[type_] = (number, self.objects.writer(key, "application/x-ndjson"))
            self._file_records[number] = 0
        return self._open[type_]

    def _roll(self, type_: str | None) -> None:
        opened = self._open.pop(type_, None)
        if opened is None:
            return
        number, writer = opened
        writer.close()
        key = records_file(self.crawl, self.run_id, number, type_)
        self.files.append({"key": key, "records": self._file_records[number], "bytes": writer.size})

    def close(self) -> None:
        for type_ in sorted(self._open, key=lambda t: self._open[t][0]):
            self._roll(type_)

    def abort(self) -> None:
        for _, writer in self._open.values():
            writer.abort()

"""A run's output: its records, each key once, copied as whole page blocks into a few large files.

Sources are this run's part objects (pages fetched and extracted) and the catalog run's output
(pages carried by a 304 or an identical body), both read in large ranges, never page by page:
a million pages are about 10,000 part reads and a few hundred 8 MB ranges. A page's block is
copied as bytes; only pages holding a record key that another page also holds are read line by
line, and there the first copy written wins (compared by the key itself, not its digest).

``pages.index`` says where each page's block landed (25 bytes a page, sorted by URL hash), so the
next run's finalizer can find the records it carries. A block that lost records to another page
is marked partial: the next run fetches that page whole rather than carry an incomplete block.
"""

from __future__ import annotations

import itertools
import json
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sluice.domain.layout import index_key, manifest_key, part_key, records_file, records_prefix
from sluice.domain.pages import DIGEST_BYTES, RECORD_DIGEST_BYTES, UrlEntry, digest, url_number
from sluice.extraction.extract import record_identity
from sluice.ports import ObjectStore, ObjectWriter

FILE_BYTES = 128 * 1024 * 1024
"""Output files roll over at page boundaries past this size (what Athena reads best)."""
_INDEX_MAGIC = b"SLINDEX1"
_INDEX_ROW = struct.Struct("<QIQIB")  # URL-hash number, file number, offset, length, partial
_KEY_START = len('{"_key": ')


class PageIndex:
    """Where each page's records are in a run's output files, by the first 64 bits of its URL hash."""

    def __init__(self) -> None:
        self.numbers, self.files, self.offsets = array("Q"), array("I"), array("Q")
        self.lengths, self.partial = array("I"), array("B")

    @classmethod
    def from_bytes(cls, data: bytes) -> PageIndex:
        if not data.startswith(_INDEX_MAGIC):
            raise ValueError("not a page index (bad header)")
        index = cls()
        for number, file, offset, length, partial in _INDEX_ROW.iter_unpack(data[len(_INDEX_MAGIC) :]):
            index.numbers.append(number)
            index.files.append(file)
            index.offsets.append(offset)
            index.lengths.append(length)
            index.partial.append(partial)
        return index

    def find(self, number: int) -> tuple[int, int, int] | None:
        """The file number, offset and length of a page's whole block (None if absent or partial)."""
        i = bisect_left(self.numbers, number)
        if i < len(self.numbers) and self.numbers[i] == number and not self.partial[i]:
            return self.files[i], self.offsets[i], self.lengths[i]
        return None

    def where(self, number: int) -> tuple[int, int, int] | None:
        """The file number, offset and length of a page's block, whole or partial (None if absent): where the
        records the output holds of the page are."""
        i = bisect_left(self.numbers, number)
        if i < len(self.numbers) and self.numbers[i] == number:
            return self.files[i], self.offsets[i], self.lengths[i]
        return None

    def __contains__(self, number: object) -> bool:
        """Whether a 304 for this page can carry its records (its whole block is there)."""
        return isinstance(number, int) and self.find(number) is not None

    def __len__(self) -> int:
        return len(self.numbers)


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
    """The pages whose records go into the output, gathered while the finalizer scans the run's URLs."""

    crawl: str
    run_id: str
    catalog_run: str | None
    typed: bool = False
    """The spec has ``types``: each page's block goes to its type's files (its lines say ``_type``)."""
    blocks: list[_Block] = field(default_factory=list)
    carried: list[tuple[int, bytes]] = field(default_factory=list)

    def add(self, entry: UrlEntry) -> None:
        result = entry.result
        if result is None or not result.holds_records or result.records == 0:
            return
        number = url_number(entry.url_hash)
        if result.block is not None:
            block = result.block
            source = part_key(self.crawl, self.run_id, block.part)
            self.blocks.append(_Block(number, source, block.offset, block.length, result.digests))
        elif result.carried:
            self.carried.append((number, result.digests))


@dataclass(frozen=True, slots=True)
class OutputSummary:
    files: list[dict[str, object]]
    records: int
    pages: int
    duplicates: int
    """Records left out because another page of the run had the same key."""
    carried_missing: int
    """Carried pages whose records the catalog run's output did not have (0 unless it was altered)."""
    bytes: int
    folder: str
    types: dict[str, int] = field(default_factory=dict)
    """Records in the output per page type (a spec with ``types``; empty for a one-type spec)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """How sources are read: ranges of up to ``span_bytes``, ``readers`` of them in flight."""

    span_bytes: int = 8 * 1024 * 1024
    readers: int = 8


def write_output(objects: ObjectStore, plan: OutputPlan, reading: Reading = Reading()) -> OutputSummary:
    """Write the run's records files, its page index and its manifest; return what was written."""
    blocks = list(plan.blocks)
    missing = 0
    if plan.carried and plan.catalog_run is not None:
        catalog = load_index(objects, plan.crawl, plan.catalog_run)
        files = _typed_files(objects, plan.crawl, plan.catalog_run) if plan.typed else {}
        for number, digests in plan.carried:
            where = catalog.find(number)
            if where is None:
                missing += 1
                continue
            file, offset, length = where
            source = files.get(file) or records_file(plan.crawl, plan.catalog_run, file)
            blocks.append(_Block(number, source, offset, length, digests))
    else:
        missing = len(plan.carried)
    _digest_unlisted(objects, blocks, typed=plan.typed)
    shared = _mark_shared_keys(blocks)
    writer = _FilesWriter(objects, plan.crawl, plan.run_id, shared, typed=plan.typed)
    try:
        for block, data in _read_blocks(objects, blocks, reading):
            writer.page(block, data)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    index = _INDEX_MAGIC + b"".join(_INDEX_ROW.pack(*row) for row in sorted(writer.index))
    objects.put(index_key(plan.crawl, plan.run_id), index, "application/octet-stream")
    summary = OutputSummary(
        files=writer.files,
        records=writer.records,
        pages=len(writer.index),
        duplicates=writer.duplicates,
        carried_missing=missing,
        bytes=writer.bytes,
        folder=objects.location(records_prefix(plan.crawl, plan.run_id)),
        types=dict(sorted(writer.types.items())),
    )
    manifest = {
        "crawl": plan.crawl,
        "run_id": plan.run_id,
        "records": summary.records,
        "pages": summary.pages,
        "bytes": summary.bytes,
        "duplicates_dropped": summary.duplicates,
        "carried_missing": summary.carried_missing,
        "files": summary.files,
        "index": index_key(plan.crawl, plan.run_id),
    }
    if plan.typed:
        manifest["types"] = summary.types
    objects.put(manifest_key(plan.crawl, plan.run_id), json.dumps(manifest, indent=2).encode(), "application/json")
    return summary


def load_index(objects: ObjectStore, crawl: str, run_id: str | None) -> PageIndex:
    """A run's page index (empty when there is no run, or it wrote none)."""
    if run_id is None:
        return PageIndex()
    data = objects.get(index_key(crawl, run_id))
    return PageIndex.from_bytes(data) if data is not None else PageIndex()


def output_block(objects: ObjectStore, crawl: str, run_id: str) -> Callable[[int], tuple[str, int, int] | None]:
    """Where a page's records are in a finished run's own output, by URL-hash number: ``(key, offset, length)``,
    or None when the output holds none of them (what ``sluice reextract`` keeps for a page it cannot re-extract:
    the output, not the run's working parts, which a finished local run no longer has)."""
    index = load_index(objects, crawl, run_id)
    files = _typed_files(objects, crawl, run_id)  # a typed run's files are in its type's folder

    def find(number: int) -> tuple[str, int, int] | None:
        where = index.where(number)
        if where is None:
            return None
        file, offset, length = where
        return files.get(file) or records_file(crawl, run_id, file), offset, length

    return find


def _typed_files(objects: ObjectStore, crawl: str, run_id: str) -> dict[int, str]:
    """A typed run's output files by number, as its manifest lists them (their type is in the key)."""
    data = objects.get(manifest_key(crawl, run_id))
    if data is None:
        return {}
    files = json.loads(data).get("files", [])
    return {int(f["key"].rsplit("part-", 1)[1].removesuffix(".jsonl")): f["key"] for f in files}


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


def _mark_shared_keys(blocks: list[_Block]) -> set[bytes]:
    """Flag the blocks holding a key digest that more than one record of the run has; return those digests.

    Digests are bucketed by their first byte into compact arrays (8 bytes a record), and each
    bucket is sorted on its own, so memory stays near 8 bytes a record with no set of them all.
    """
    buckets: list[array[int]] = [array("Q") for _ in range(256)]
    for block in blocks:
        for key in _key_digests(block.digests):
            buckets[key[0]].append(int.from_bytes(key, "big"))
    shared: set[bytes] = set()
    for i, bucket in enumerate(buckets):
        ordered = sorted(bucket)
        shared.update(a.to_bytes(DIGEST_BYTES, "big") for a, b in itertools.pairwise(ordered) if a == b)
        buckets[i] = array("Q")  # each bucket's memory goes as soon as it is sorted
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

    def __init__(self, objects: ObjectStore, crawl: str, run_id: str, shared: set[bytes], *, typed: bool) -> None:
        self.objects, self.crawl, self.run_id, self.typed = objects, crawl, run_id, typed
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
            if digest(key) in self._shared:
                if key in self._emitted:
                    dropped += 1
                    continue
                self._emitted.add(key)
            kept_lines.append(line)
        return b"".join(kept_lines), len(kept_lines), dropped

    def _writer(self, type_: str | None) -> tuple[int, ObjectWriter]:
        if type_ not in self._open:
            # Numbered across types in the order files open: a page index row's file number names one file.
            number = len(self.files) + len(self._open)
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

"""A run's page index: where each page's records are in its output files, by the first 64 bits of its URL hash.

``pages.index`` is 25 bytes a page, sorted by URL hash (``sluice.pipeline.finalize.output`` writes it): the
next run's finalizer finds the records a page reuses through it, and ``sluice reextract`` the
records it keeps. A large index is never read whole by a shard: its rows are fixed-size and sorted,
so a shard bisects to its own range with small range reads.
"""

from __future__ import annotations

import json
import struct
from array import array
from bisect import bisect_left
from collections.abc import Callable

from sluice.domain.layout import index_key, manifest_key, records_file
from sluice.domain.shards import Shard
from sluice.ports import ObjectStore

INDEX_MAGIC = b"SLINDEX1"
INDEX_ROW = struct.Struct("<QIQIB")  # URL-hash number, file number, offset, length, partial
_INDEX_MAGIC, _INDEX_ROW = INDEX_MAGIC, INDEX_ROW
_WHOLE_INDEX_BYTES = 8 * 1024 * 1024
"""A catalog index up to this size is read whole by a shard; a larger one, only the shard's rows."""


class PageIndex:
    """Where each page's records are in a run's output files, by the first 64 bits of its URL hash."""

    def __init__(self) -> None:
        self.numbers, self.files, self.offsets = array("Q"), array("I"), array("Q")
        self.lengths, self.partial = array("I"), array("B")

    @classmethod
    def from_bytes(cls, data: bytes) -> PageIndex:
        if not data.startswith(_INDEX_MAGIC):
            raise ValueError("not a page index (bad header)")
        return cls.from_rows(data[len(_INDEX_MAGIC) :])

    @classmethod
    def from_rows(cls, rows: bytes) -> PageIndex:
        index = cls()
        for number, file, offset, length, partial in _INDEX_ROW.iter_unpack(rows):
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


def load_index(objects: ObjectStore, crawl: str, run_id: str | None, shard: Shard | None = None) -> PageIndex:
    """A run's page index, or only the rows of one shard's range (empty when there is no run, or it wrote none).

    A large index is not read whole by a shard: its rows are fixed-size and sorted, so the shard's
    first and last rows are found by bisecting with small range reads, and its rows read in one."""
    if run_id is None:
        return PageIndex()
    key = index_key(crawl, run_id)
    size = objects.size(key) if shard is not None else None
    if shard is None or size is None or size <= _WHOLE_INDEX_BYTES:
        data = objects.get(key)
        if data is None:
            return PageIndex()
        index = PageIndex.from_bytes(data)
        if shard is None or (shard.lo == 0 and shard.hi >= 1 << 64):
            return index
        first, last = bisect_left(index.numbers, shard.lo), bisect_left(index.numbers, shard.hi)
        head = len(_INDEX_MAGIC)
        return PageIndex.from_rows(data[head + first * _INDEX_ROW.size : head + last * _INDEX_ROW.size])
    if objects.get_range(key, 0, len(_INDEX_MAGIC)) != _INDEX_MAGIC:
        raise ValueError(f"{key}: not a page index (bad header)")
    rows = (size - len(_INDEX_MAGIC)) // _INDEX_ROW.size

    def number_at(row: int) -> int:
        raw = objects.get_range(key, len(_INDEX_MAGIC) + row * _INDEX_ROW.size, 8)
        return int(struct.unpack("<Q", raw)[0])

    def first_at_least(value: int) -> int:
        low, high = 0, rows
        while low < high:
            middle = (low + high) // 2
            if number_at(middle) < value:
                low = middle + 1
            else:
                high = middle
        return low

    first, last = first_at_least(shard.lo), first_at_least(shard.hi)
    if first >= last:
        return PageIndex()
    start = len(_INDEX_MAGIC) + first * _INDEX_ROW.size
    return PageIndex.from_rows(objects.get_range(key, start, (last - first) * _INDEX_ROW.size))


def output_block(objects: ObjectStore, crawl: str, run_id: str) -> Callable[[int], tuple[str, int, int] | None]:
    """Where a page's records are in a finished run's own output, by URL-hash number: ``(key, offset, length)``,
    or None when the output holds none of them (what ``sluice reextract`` keeps for a page it cannot re-extract:
    the output, not the run's working parts, which a finished local run no longer has)."""
    index = load_index(objects, crawl, run_id)
    files = output_files(objects, crawl, run_id)  # a typed run's files are in its type's folder

    def find(number: int) -> tuple[str, int, int] | None:
        where = index.where(number)
        if where is None:
            return None
        file, offset, length = where
        return files.get(file) or records_file(crawl, run_id, file), offset, length

    return find


def file_number(key: str) -> int:
    """An output file's number from its key: ``part-SSSSS-NNNNN`` (a sharded run's) or ``part-NNNNN`` (before)."""
    name = key.rsplit("/", 1)[-1].removeprefix("part-").removesuffix(".jsonl")
    shard, _, number = name.rpartition("-")
    return (int(shard) << 16 | int(number)) if shard else int(number)


def output_files(objects: ObjectStore, crawl: str, run_id: str) -> dict[int, str]:
    """A run's output files by number, as its manifest lists them (a typed run's type is in the key)."""
    data = objects.get(manifest_key(crawl, run_id))
    if data is None:
        return {}
    files = json.loads(data).get("files", [])
    return {file_number(str(f["key"])): str(f["key"]) for f in files}

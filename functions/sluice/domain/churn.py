"""Records present in the catalog run's output and absent from this run's: ``records.gone``.

Counted by key, across pages: a record that moved from page 3 to page 4 (pagination shifts) is
not gone. Both runs' keys come from the 8-byte key digests every page result keeps, so nothing is
read but the two runs' URL entries. Memory is 8 bytes per record per run in 256 arrays by the
digest's first byte, and one bucket's set at a time when counting: a million pages of 20 records
hold about 320 MB at most, inside the finalizer's memory beside its output plan.

Pages with more than :data:`~sluice.domain.pages.MAX_DIGESTS` records keep no digests; their
records are counted on neither side (``unknown_pages`` says how many such pages there were).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

from sluice.domain.pages import PageResult

_RECORD = struct.Struct(">QQ")  # key digest, content digest (see sluice.domain.pages.record_digests)


def _buckets() -> list[array[int]]:
    return [array("Q") for _ in range(256)]


@dataclass
class RecordChurn:
    """Key digests of the catalog run's output (``before``) and this run's (``after``)."""

    before: list[array[int]] = field(default_factory=_buckets)
    after: list[array[int]] = field(default_factory=_buckets)
    unknown_pages: int = 0

    def add_before(self, result: PageResult | None) -> None:
        """A page of the catalog run: its records were in that run's output if it was fetched or carried."""
        self._add(self.before, result)

    def add_after(self, result: PageResult | None) -> None:
        """A page of this run: its records are in this run's output if it was fetched or carried."""
        self._add(self.after, result)

    def _add(self, side: list[array[int]], result: PageResult | None) -> None:
        if result is None or not result.holds_records or not result.records:
            return
        if not result.digests:
            self.unknown_pages += 1
            return
        for key, _ in _RECORD.iter_unpack(result.digests):
            side[key >> 56].append(key)

    def counts(self) -> tuple[int, int]:
        """``(previous, gone)``: distinct records of the catalog run, and how many of them this run lacks."""
        previous = gone = 0
        for before, after in zip(self.before, self.after, strict=True):
            if not before:
                continue
            had = set(before)
            previous += len(had)
            gone += len(had.difference(after))
        return previous, gone

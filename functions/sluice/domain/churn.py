"""Records present in the catalog run's output and absent from this run's: ``records.gone``.

Counted by key, across pages: a record that moved from page 3 to page 4 (pagination shifts) is
not gone. Both runs' keys come from the 8-byte key digests every page result keeps, so nothing is
read but the two runs' URL entries. Pages land in finalize shards by their URL, and page 3 and
page 4 rarely share one, so no shard can count this alone: each shard keeps its pages' digests
(8 bytes a record a run) and hands them on by key section, the digests' own hash range
(``sections``); the task of one key section then sees every copy of its keys, from every shard,
and counts them (:func:`counts`).

Pages with more than :data:`~sluice.domain.pages.MAX_DIGESTS` records keep no digests; their
records are counted on neither side (``unknown_pages`` says how many such pages there were).
"""

from __future__ import annotations

import itertools
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

from sluice.domain.pages import PageResult, key_numbers
from sluice.domain.shards import Shard

_RECORD = struct.Struct(">QQ")  # key digest, content digest (see sluice.domain.pages.record_digests)


def _digests() -> array[int]:
    return array("Q")


@dataclass
class RecordChurn:
    """Key digests of one shard's pages in the catalog run's output (``before``) and in this run's (``after``)."""

    before: array[int] = field(default_factory=_digests)
    after: array[int] = field(default_factory=_digests)
    unknown_pages: int = 0

    def add_before(self, result: PageResult | None) -> None:
        """A page of the catalog run: its records were in that run's output if it was fetched or reused."""
        self._add(self.before, result)

    def add_after(self, result: PageResult | None) -> None:
        """A page of this run: its records are in this run's output if it was fetched or reused."""
        self._add(self.after, result)

    def add_before_held(self, digests: bytes) -> None:
        """A page of the catalog run that held records (``Frontier.held_digests``): its record digests."""
        self._add_digests(self.before, digests)

    def _add(self, side: array[int], result: PageResult | None) -> None:
        if result is None or not result.holds_records or not result.records:
            return
        self._add_digests(side, result.digests)

    def _add_digests(self, side: array[int], digests: bytes) -> None:
        if not digests:
            self.unknown_pages += 1
            return
        if len(digests) % _RECORD.size:
            side.extend(key for key, _ in _RECORD.iter_unpack(digests))  # raises, as it always did
        side.extend(key_numbers(digests))  # each record's key digest: no Python step per record

    def counts(self) -> tuple[int, int]:
        """``(previous, gone)`` over everything added here (one shard's pages, or a whole run in one place)."""
        return counts(self.before, self.after)


def sections(digests: Iterable[int], count: int) -> list[array[int]]:
    """Distinct digests, sorted, split into ``count`` key sections by their first bits."""
    ordered = sorted(set(digests))
    cuts = [0] + [bisect_left(ordered, Shard(k, count).lo) for k in range(1, count)] + [len(ordered)]
    return [array("Q", ordered[a:b]) for a, b in itertools.pairwise(cuts)]


def counts(before: Iterable[int], after: Iterable[int]) -> tuple[int, int]:
    """``(previous, gone)`` of one key section: distinct catalog keys, and how many of them this run lacks."""
    had = set(before)
    return len(had), len(had.difference(after))

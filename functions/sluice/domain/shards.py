"""Finalize shards: sub-ranges of a run's URL-hash keyspace, each finalized by its own invocation.

A shard is a range ``[lo, hi)`` of the first 64 bits of the URL hash (``url_number``). There is
a power of two of them, so a shard never straddles two of the ledger's 16 URL partitions once
there are 16 or more: it is one DynamoDB ``Query`` (``pk = url#RUN#H AND sk BETWEEN ...``) and
one range of the SQLite table. Fewer shards (a small run) cover several partitions, one query
each. The same ranges serve the record keys: key section ``k`` holds the key digests whose first
bits are ``k``, so the work that needs every copy of a key (a key two pages hold, records gone)
is split the same way, over the digests' own hash.
"""

from __future__ import annotations

from dataclasses import dataclass

SPACE = 1 << 64
PARTITIONS = 16
MAX_SHARDS = 1 << 16
"""Output file numbers keep the shard in their top 16 bits (``part-SSSSS-NNNNN.jsonl``)."""


class RunTooLarge(ValueError):
    """The run needs more shards than the stack allows: it ends failed, and the reason says what to raise."""


def shard_count(pages: int, per_shard: int, most: int = MAX_SHARDS) -> int:
    """The smallest power of two of shards holding at most ``per_shard`` pages each (at least one)."""
    if per_shard < 1:
        raise ValueError(f"finalize_shard_pages must be at least 1, not {per_shard}")
    count = 1
    while count * per_shard < pages:
        count *= 2
    if count > most:
        raise RunTooLarge(
            f"{pages:,} pages need {count:,} finalize shards of at most {per_shard:,} pages, "
            f"over the {most:,} the stack allows (finalize_max_shards): raise finalize_shard_pages "
            "(and the finalizer's memory) or finalize_max_shards"
        )
    return count


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count``: the URL hashes (and key digests) whose first 64 bits are in ``[lo, hi)``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or self.count & (self.count - 1) or self.count > MAX_SHARDS:
            raise ValueError(f"a shard count is a power of two up to {MAX_SHARDS}, not {self.count}")
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index} is outside 0..{self.count - 1}")

    @property
    def lo(self) -> int:
        return self.index * (SPACE // self.count)

    @property
    def hi(self) -> int:
        return (self.index + 1) * (SPACE // self.count)

    def holds(self, number: int) -> bool:
        return self.lo <= number < self.hi

    @property
    def name(self) -> str:
        return f"{self.index:05d}"

    def partitions(self) -> list[tuple[int, str, str]]:
        """``(partition, first, last)`` per URL partition the shard covers: sort keys ``BETWEEN first AND last``.

        URL hashes are 40 hex digits; ``last`` is the range's last 64-bit prefix followed by ``~``
        (after every hex digit), so every longer key with that prefix is inside."""
        ranges = []
        width = SPACE // PARTITIONS
        for partition in range(self.lo // width, (self.hi - 1) // width + 1):
            lo, hi = max(self.lo, partition * width), min(self.hi, (partition + 1) * width)
            ranges.append((partition, f"{lo:016x}", f"{hi - 1:016x}~"))
        return ranges

    @classmethod
    def of(cls, number: int, count: int) -> int:
        """The index of the shard of ``count`` that holds ``number`` (a URL number or a key digest)."""
        return number // (SPACE // count)


def all_shards(count: int) -> list[Shard]:
    return [Shard(i, count) for i in range(count)]

"""The run's seed URLs as a sorted array of 64-bit URL-hash prefixes: 8 bytes a URL, looked up by bisection.

The scheduler writes it before it sends a single seed; a fetcher loads it once per run per
container and never claims a link that is a seed, so a seed is enqueued once without a claim.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from sluice.domain.pages import url_number

_MAGIC = b"SLSEEDS1"


class SeedSet:
    """An immutable set of URL hashes (their first 64 bits)."""

    __slots__ = ("_numbers",)

    def __init__(self, numbers: array[int]) -> None:
        self._numbers = numbers

    @classmethod
    def of(cls, url_hashes: Iterable[str]) -> SeedSet:
        return cls.of_numbers(url_number(h) for h in url_hashes)

    @classmethod
    def of_numbers(cls, numbers: Iterable[int]) -> SeedSet:
        return cls(array("Q", sorted(set(numbers))))

    @classmethod
    def from_bytes(cls, data: bytes) -> SeedSet:
        if not data.startswith(_MAGIC):
            raise ValueError("not a seed set (bad header)")
        numbers = array("Q")
        numbers.frombytes(data[len(_MAGIC) :])
        return cls(numbers)

    def to_bytes(self) -> bytes:
        return _MAGIC + self._numbers.tobytes()

    def __len__(self) -> int:
        return len(self._numbers)

    def numbers(self) -> Iterator[int]:
        """The set's numbers, in order."""
        return iter(self._numbers)

    def has_number(self, number: int) -> bool:
        i = bisect_left(self._numbers, number)
        return i < len(self._numbers) and self._numbers[i] == number

    def __contains__(self, url_hash: object) -> bool:
        return isinstance(url_hash, str) and self.has_number(url_number(url_hash))

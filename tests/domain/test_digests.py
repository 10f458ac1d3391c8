"""Record digests: the bytes every earlier run packed, each from a copy of one set-up hasher; a page the catalog run
had no digests of classified without a lookup."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from sluice.domain import pages
from sluice.domain.pages import (
    classify_digests,
    digest,
    record_digest,
    record_digests,
    unpack_digests,
)

TEXTS = ["", "k", "https://books.example/café/1.html", "東京 🐍", "lone \ud800 surrogate", "x" * 10_000, "\x00\n"]


def blake2b_8(text: str) -> bytes:
    """The digest as it was first defined: a hasher built for each text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def test_digests_are_the_bytes_earlier_runs_packed() -> None:
    for text in TEXTS:
        assert digest(text) == blake2b_8(text)
        assert record_digest(text, "0123456789abcdef0123456789abcdef") == blake2b_8(text) + blake2b_8(
            "0123456789abcdef0123456789abcdef"
        )
    assert digest("https://books.example/café/1.html").hex() == "eb410dcb2f3343f3"
    assert record_digests([("k1", "c1"), ("k2", "c2")]) == b"".join(
        blake2b_8(k) + blake2b_8(c) for k, c in [("k1", "c1"), ("k2", "c2")]
    )


def test_a_digest_builds_no_hasher(monkeypatch: pytest.MonkeyPatch) -> None:
    built = 0
    blake2b = hashlib.blake2b

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal built
        built += 1
        return blake2b(*args, **kwargs)

    monkeypatch.setattr(hashlib, "blake2b", counting)
    for text in TEXTS:
        digest(text)
        record_digest(text, text)
    assert built == 0


class CountingDigests(dict[bytes, bytes]):
    lookups = 0

    def get(self, key: bytes, default: Any = None) -> Any:
        CountingDigests.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key: bytes) -> bytes:
        CountingDigests.lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        CountingDigests.lookups += 1
        return super().__contains__(key)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> type[CountingDigests]:
    """The catalog's digests of a page, unpacked into a map that counts the lookups made in it."""
    CountingDigests.lookups = 0
    monkeypatch.setattr(pages, "unpack_digests", lambda packed: CountingDigests(unpack_digests(packed)))
    return CountingDigests


def test_a_first_crawl_s_records_are_all_new_with_no_lookup(lookups: type[CountingDigests]) -> None:
    mine = [record_digest(f"key{n}", f"content{n}") for n in range(50)]
    assert classify_digests(mine, b"") == (50, 0, list(range(50)))
    assert lookups.lookups == 0


def test_a_later_crawl_tells_new_changed_and_unchanged(lookups: type[CountingDigests]) -> None:
    before = record_digests([("a", "1"), ("b", "2"), ("c", "3")])
    mine = [record_digest("a", "1"), record_digest("new", "9"), record_digest("c", "changed"), record_digest("b", "2")]
    assert classify_digests(mine, before) == (1, 1, [1, 2])
    assert lookups.lookups == 4

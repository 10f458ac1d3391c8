"""The finalizer's record-key steps, done at C speed, give the bytes the per-record Python loops gave.

Each step is checked against the loop it replaced (kept here as the reference), on keys held once, twice in one
write group, and across groups and scan shards: the scan objects, keys objects and output must not change.
"""

from __future__ import annotations

import random
from array import array
from collections import defaultdict

import pytest

from sluice.domain import churn
from sluice.domain.pages import DIGEST_BYTES, RECORD_DIGEST_BYTES, key_numbers
from sluice.domain.shards import Shard
from sluice.pipeline.finalize.output import _Block, _mark_shared_keys, first_positions, position
from sluice.pipeline.finalize.shards import _OUTPUT_KEY, _held_twice, _output_keys

PREFIXES = ("runs/crawl=c/run=old/records/", "work/crawl=c/run=new/parts/")


def _packed(keys: list[int], rng: random.Random) -> bytes:
    return b"".join(k.to_bytes(8, "big") + rng.getrandbits(64).to_bytes(8, "big") for k in keys)


def _groups(seed: int, count: int) -> list[list[_Block]]:
    """Blocks in ``count`` write groups, their keys drawn from a small pool: many held twice, in and across groups."""
    rng = random.Random(seed)
    edge = Shard(1, max(count, 2)).lo  # the first key of section 1, and the last of section 0
    pool = [rng.getrandbits(64) for _ in range(300)] + [0, 2**64 - 1, edge, edge - 1]
    groups: list[list[_Block]] = [[] for _ in range(count)]
    for n in range(120):
        part, catalog = f"{PREFIXES[1]}{rng.getrandbits(128):032x}.jsonl", f"{PREFIXES[0]}part-00000-0000{n % 3}.jsonl"
        source = rng.choice([part, catalog])
        keys = rng.sample(pool, rng.randint(0, 12))
        groups[rng.randrange(count)].append(_Block(n, source, rng.randrange(10**6), 100, _packed(keys, rng)))
    return groups


def _old_first_positions(blocks: list[_Block]) -> dict[int, bytes]:
    first: dict[int, bytes] = {}
    for block in sorted(blocks, key=lambda b: (b.source, b.offset)):
        where = position(block.source, block.offset, PREFIXES)
        for i in range(0, len(block.digests), RECORD_DIGEST_BYTES):
            first.setdefault(int.from_bytes(block.digests[i : i + DIGEST_BYTES], "big"), where)
    return first


def _old_output_rows(groups: list[list[_Block]], count: int) -> list[bytes]:
    out: list[list[tuple[int, bytes, int]]] = [[] for _ in range(count)]
    for group, held in enumerate(groups):
        for digest, where in _old_first_positions(held).items():
            out[Shard.of(digest, count)].append((digest, where, group))
    return [b"".join(_OUTPUT_KEY.pack(d, w, g) for d, w, g in sorted(rows)) for rows in out]


@pytest.mark.parametrize(("seed", "count"), [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16)])
def test_output_key_rows_are_the_per_record_loops(seed: int, count: int) -> None:
    groups = _groups(seed, count)
    for held in groups:
        assert first_positions(held, PREFIXES) == _old_first_positions(held)
    assert [b"".join(rows) for rows in _output_keys(groups, PREFIXES, count)] == _old_output_rows(groups, count)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_keys_held_twice_are_the_dict_of_every_row(seed: int) -> None:
    count = 4
    shards = [b"".join(_output_keys(_groups(seed * 10 + s, count), PREFIXES, count)[1]) for s in range(3)]
    every: dict[int, list[tuple[bytes, int]]] = defaultdict(list)
    for rows in shards:
        for digest, where, group in _OUTPUT_KEY.iter_unpack(rows):
            every[digest].append((where, group))
    twice = {digest: copies for digest, copies in every.items() if len(copies) > 1}
    assert twice  # the case that matters: keys two groups or two scan shards hold
    assert _held_twice(shards) == twice
    assert _held_twice([shards[0][: _OUTPUT_KEY.size]]) == {}


def test_key_numbers_and_churn_sections_are_the_loops() -> None:
    rng = random.Random(7)
    keys = [rng.getrandbits(64) for _ in range(500)] + [0, 2**64 - 1]
    packed = _packed(keys + keys[:40], rng)
    assert list(key_numbers(packed)) == keys + keys[:40]
    assert list(key_numbers(b"")) == []
    side = churn.RecordChurn()
    side._add_digests(side.after, packed)
    assert list(side.after) == keys + keys[:40]
    for count in (1, 2, 4, 8, 16):
        old: list[array[int]] = [array("Q") for _ in range(count)]
        last = None
        for key in sorted(side.after):
            if key != last:
                old[Shard.of(key, count)].append(key)
                last = key
        assert churn.sections(side.after, count) == old


def test_shared_keys_marked_as_before() -> None:
    blocks = [b for held in _groups(21, 2) for b in held]
    seen: dict[bytes, int] = defaultdict(int)
    for block in blocks:
        for i in range(0, len(block.digests), RECORD_DIGEST_BYTES):
            seen[block.digests[i : i + DIGEST_BYTES]] += 1
    shared = {key for key, n in seen.items() if n > 1}
    assert shared
    assert _mark_shared_keys(blocks) == shared
    assert [b.exact for b in blocks] == [
        any(b.digests[i : i + DIGEST_BYTES] in shared for i in range(0, len(b.digests), RECORD_DIGEST_BYTES))
        for b in blocks
    ]

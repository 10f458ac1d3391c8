"""``PageResult.but`` is ``dataclasses.replace`` for a result, field for field."""

from __future__ import annotations

import dataclasses

import pytest

from sluice.domain.pages import ArchiveRef, PageResult, PartBlock, RecordCounts

FULL = PageResult(
    url="https://books.example/1.html",
    depth=2,
    origin="link",
    outcome="fetched",
    reason="r",
    status=200,
    etag='"e"',
    last_modified="Mon",
    body_hash="b" * 32,
    counts=RecordCounts(1, 2, 3),
    items=6,
    missing={"price": 1},
    rejected={"title": 2},
    digests=bytes(range(16)),
    reused=True,
    ms=12,
    dropped_links=1,
    fallback_keys=2,
    capped_links=3,
    beyond_depth=4,
    fetched_at=1_800_000_000,
    type="book",
    via="books",
    carry={"price": 1.5},
    parent="0123456789abcdef",
    carried_by_link={"fedcba9876543210": {"price": 2}},
    carried_block=PartBlock("p", 1, 2),
    carry_stale=True,
    carry_dropped={"name": 1},
    interval=3600,
    archive=ArchiveRef("run", "file", 1, 2),
    proxy="a",
    proxy_tier=1,
    proxy_failures=(("b", "refused", True),),
)


def test_every_field_is_set_and_kept_as_replace_does() -> None:
    for field in dataclasses.fields(PageResult):
        other = getattr(PageResult(url="u", depth=0, origin="seed", outcome="skipped"), field.name)
        changed = FULL.but(**{field.name: other})
        assert changed == dataclasses.replace(FULL, **{field.name: other})
        assert getattr(changed, field.name) == other
    assert FULL.but() == FULL
    assert FULL.but() is not FULL
    assert FULL.but(block=PartBlock("q", 3, 4), ms=5) == dataclasses.replace(FULL, block=PartBlock("q", 3, 4), ms=5)


def test_an_unknown_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no_such"):
        FULL.but(no_such=1)

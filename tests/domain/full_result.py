"""A page result with every field set (none at its default), shared by the tests that store, size, copy or read one.

The item codec's tests pin the bytes this exact result is stored as (``tests/adapters/test_item_codec.py``):
change a value here and they say so. A test that needs another value passes it: ``every_field(digests=...)``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sluice.domain.pages import ArchiveRef, PageResult, PartBlock, RecordCounts

RUN = "20261201T000000Z-abcdef"


def every_field(**changed: Any) -> PageResult:
    """The result with every field set, with ``changed`` fields instead."""
    whole = PageResult(
        url="https://books.example/a.html",
        depth=2,
        origin="link",
        outcome="fetched",
        reason="r",
        status=200,
        etag='"e1"',
        last_modified="Sun, 29 Nov 2026 21:00:00 GMT",
        body_hash="0123abcd",
        counts=RecordCounts(3, 2, 1),
        items=7,
        missing={"price": 1},
        rejected={"name": 2},
        digests=bytes(range(16)),
        block=PartBlock("p1", 10, 20),
        reused=True,
        ms=312,
        dropped_links=1,
        fallback_keys=2,
        capped_links=3,
        beyond_depth=4,
        fetched_at=1796000000,
        type="book",
        via="books",
        carry={"price": "9.99"},
        parent="0123456789abcdef",
        carried_by_link={"fedcba9876543210": {"price": "1"}},
        carried_block=PartBlock("p2", 5, 6),
        carry_stale=True,
        carry_dropped={"blurb": 3},
        interval=86400,
        archive=ArchiveRef(RUN, "f1", 0, 99),
        proxy="eu",
        proxy_tier=1,
        proxy_failures=(("us", "timeout", True),),
    )
    return replace(whole, **changed)

"""A page's records against the catalog run's digests, as a visit classifies them: new, changed and unchanged, the
new and changed in page order, and a first crawl's page classified with no digest looked up."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.domain import pages
from sluice.domain.pages import Prior, record_digests
from sluice.extraction.extract import Record
from sluice.pipeline.visit import page_results
from sluice.pipeline.visit.page_results import classify_records


def record(key: str, price: str) -> Record:
    return Record(key=key, data={"title": key, "price": price}, page_url="https://books.example/", position=0)


def test_new_changed_and_unchanged_against_the_catalog_runs_digests() -> None:
    before = [record("a", "1"), record("b", "2"), record("c", "3")]
    prior = Prior(records=3, digests=record_digests((r.identity, r.content_hash) for r in before))
    now = [record("a", "1"), record("d", "9"), record("b", "5"), record("c", "3"), record("e", "7")]
    counts, upserts = classify_records(now, prior)
    assert (counts.new, counts.changed, counts.unchanged) == (2, 1, 2)
    assert [r.key for r in upserts] == ["d", "b", "e"]  # page order, not new first
    assert classify_records(now, None) == classify_records(now, Prior())  # no catalog run, or no digests: all new
    assert classify_records(now, None)[0].new == 5


def test_a_first_crawl_looks_up_no_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    unpacked = 0
    unpack = pages.unpack_digests

    def counting(packed: bytes) -> Any:
        nonlocal unpacked
        unpacked += 1
        return unpack(packed)

    monkeypatch.setattr(pages, "unpack_digests", counting)
    monkeypatch.setattr(page_results, "unpack_digests", counting, raising=False)
    now = [record(str(i), "1") for i in range(20)]
    counts, upserts = classify_records(now, Prior(records=0))  # a page the catalog run saw with no records
    assert (counts.new, len(upserts)) == (20, 20)
    assert unpacked == 0
    classify_records(now, Prior(records=1, digests=record_digests([("0", "x")])))
    assert unpacked == 1

"""records.gone: by key across pages, so a record that moved pages is not gone."""

from __future__ import annotations

from sluice.domain.churn import RecordChurn, counts, sections
from sluice.domain.pages import Outcome, PageResult, RecordCounts, record_digests


def page(url: str, keys: list[str], outcome: Outcome = "fetched", *, digests: bool = True) -> PageResult:
    packed = record_digests((k, "content") for k in keys) if digests else b""
    return PageResult(url, 0, "seed", outcome, counts=RecordCounts(new=len(keys)), digests=packed)


def test_a_record_that_moved_to_another_page_is_not_gone() -> None:
    churn = RecordChurn()
    churn.add_before(page("p3", ["a", "b"]))
    churn.add_before(page("p4", ["c"]))
    churn.add_after(page("p3", ["b"]))
    churn.add_after(page("p4", ["a", "c"]))  # "a" moved from page 3 to page 4
    assert churn.counts() == (3, 0)


def test_records_of_pages_that_failed_or_vanished_are_gone() -> None:
    churn = RecordChurn()
    for name, keys in [("p1", ["a", "b"]), ("p2", ["c", "d"]), ("p3", ["e"])]:
        churn.add_before(page(name, keys))
    churn.add_after(page("p1", ["a", "b"]))
    churn.add_after(page("p2", ["c", "d"], "failed"))  # failed pages keep digests; their records are not in the output
    assert churn.counts() == (5, 3)


def test_pages_too_big_for_digests_are_counted_apart_not_as_gone() -> None:
    churn = RecordChurn()
    churn.add_before(page("big", ["a"], digests=False))
    churn.add_before(page("p", ["b"]))
    churn.add_after(page("p", ["b"]))
    assert churn.counts() == (1, 0)
    assert churn.unknown_pages == 1


def test_many_records_spread_over_every_bucket() -> None:
    churn = RecordChurn()
    keys = [f"key-{n}" for n in range(5_000)]
    churn.add_before(page("p", keys))
    churn.add_after(page("p", keys[:4_000]))
    assert churn.counts() == (5_000, 1_000)


def test_key_sections_split_the_count_without_changing_it() -> None:
    """Shards hand their digests on by key section; the sections' counts add up to the whole run's."""
    churn = RecordChurn()
    keys = [f"key-{n}" for n in range(3_000)]
    churn.add_before(page("p3", keys[:2_000]))
    churn.add_before(page("p4", keys[2_000:]))
    churn.add_after(page("p4", keys[1_000:2_500]))  # moved between pages (and so, mostly, between shards)
    before, after = sections(churn.before, 16), sections(churn.after, 16)
    assert all(len(set(s)) == len(s) for s in before)  # distinct within a section
    parts = [counts(b, a) for b, a in zip(before, after, strict=True)]
    assert (sum(p for p, _ in parts), sum(g for _, g in parts)) == churn.counts() == (3_000, 1_500)

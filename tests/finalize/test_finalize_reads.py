"""The finalizer's scan reads each URL's result once: the local store sizes an entry from its result as stored.

A run's cost estimate prices each URL item by its size on DynamoDB (``Frontier.stored_bytes``). The scan used
to size every entry by encoding its decoded result again (``codec.result_plain``); ``Frontier.scan_sized``
gives each entry with its size, and the local frontier takes it from the JSON it has just parsed. What the
finalizer writes does not change: the sizes are the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.domain.full_result import every_field

from sluice.adapters.aws import codec
from sluice.adapters.local import LocalStore
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.domain.pages import ArchiveRef, PageResult, RecordCounts, UrlEntry
from sluice.domain.shards import Shard
from sluice.messages import UrlTask
from sluice.pipeline.finalize.driver import finalize_run, rebuild_output
from sluice_tools import synthetic
from sluice_tools.runner.local import LocalFleet

RUN = "20261203T000000Z-abcdef"
FULL = every_field(
    digests=bytes(range(32)), reused=False, carry={"price": "9.99 €"}, archive=ArchiveRef(RUN, "f1", 0, 99)
)
"""A result with every field set (a non-ASCII value too), so every attribute is stored and sized."""


def _never(_: dict[str, object]) -> None:
    raise AssertionError("no trigger here")


def _generic(frontier: SqliteFrontier, run_id: str, *, shard: Shard | None = None) -> Iterator[tuple[UrlEntry, int]]:
    """What the scan did before (and the AWS frontier does): each entry, sized by encoding its result again."""
    for entry in frontier.scan(run_id, shard=shard):
        yield entry, codec.stored_bytes(run_id, entry)


def test_the_local_frontier_sizes_every_kind_of_entry_as_the_codec_does(tmp_path: Path) -> None:
    store = LocalStore.open(tmp_path / "state")
    try:
        frontier = store.frontier
        frontier.claim(
            RUN,
            [
                UrlTask(url="https://books.example/a.html", depth=2, parent="0123456789abcdef", via="books"),
                UrlTask(url="https://books.example/waiting", depth=1, parent="00000000000000ab", carry={"k": "v"}),
                UrlTask(url="https://books.example/plain", depth=1),
            ],
            seeds=2,
            max_pages=100,
        )
        frontier.complete(
            RUN,
            [
                FULL,
                PageResult("https://books.example/", 0, "seed", "failed", reason="HTTP 404", status=404),
                PageResult("https://books.example/b", 0, "seed", "skipped", reason="robots.txt disallows"),
            ],
        )
        sized = list(frontier.scan_sized(RUN))
        assert sized == list(_generic(frontier, RUN))
        assert len(sized) == 5
        assert sum(entry.done for entry, _ in sized) == 3
        halves = [list(frontier.scan_sized(RUN, shard=Shard(i, 2))) for i in range(2)]
        assert halves[0] + halves[1] == sized
    finally:
        store.close()


def _synthetic(tmp_path: Path, pages: int) -> tuple[Path, LocalStore, str]:
    specs = tmp_path / "crawls"
    synthetic.write_spec(specs)
    store = LocalStore.open(tmp_path / "state")
    return specs, store, synthetic.write_run(store, pages)


def test_finalizing_sizes_no_url_by_encoding_its_result_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: one ``codec.result_plain`` a done URL (``stored_bytes`` encoding the decoded result again)."""
    specs, store, run_id = _synthetic(tmp_path, 300)
    encoded = 0
    real = codec.result_plain

    def counting(result: PageResult) -> dict[str, Any]:
        nonlocal encoded
        encoded += 1
        return real(result)

    try:
        services = store.services(
            specs, LocalFleet(specs, tmp_path / "state").tuning, finalize_later=_never, continue_start=_never
        )
        monkeypatch.setattr(codec, "result_plain", counting)
        done = finalize_run(synthetic.CRAWL, run_id, services, settled=True)
    finally:
        store.close()
    assert done is not None
    assert done.summary.to_json()["pages"]["fetched"] > 200
    assert encoded == 0


def _outputs(folder: Path) -> dict[str, bytes]:
    """The run's output objects: records, page index, manifest, summary."""
    runs = folder / "objects" / "runs"
    return {str(p.relative_to(runs)): p.read_bytes() for p in sorted(runs.rglob("*")) if p.is_file()}


def test_a_run_finalized_through_the_sized_scan_writes_what_the_encoding_scan_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write a drained run's output through the sized scan, then again sizing each entry the old way: the same."""
    specs, store, run_id = _synthetic(tmp_path, 400)
    try:
        services = store.services(
            specs, LocalFleet(specs, tmp_path / "state").tuning, finalize_later=_never, continue_start=_never
        )
        done = finalize_run(synthetic.CRAWL, run_id, services, settled=True)
        assert done is not None
        sized = _outputs(tmp_path)
        run = services.ledger.get_run(synthetic.CRAWL, run_id)
        assert run is not None
        monkeypatch.setattr(SqliteFrontier, "scan_sized", _generic)
        rebuild_output(services, run, services.spec(synthetic.CRAWL))
        encoding = _outputs(tmp_path)
    finally:
        store.close()
    assert sized == encoding


def _generic_digests(frontier: SqliteFrontier, run_id: str, *, shard: Shard | None = None) -> Iterator[bytes]:
    """What the catalog scan read before (and the AWS frontier does): every result decoded, its digests taken."""
    for entry in frontier.scan(run_id, consistent=False, shard=shard):
        result = entry.result
        if result is not None and result.holds_records and result.records:
            yield result.digests


def test_the_local_frontier_gives_the_held_digests_the_results_hold(tmp_path: Path) -> None:
    store = LocalStore.open(tmp_path / "state")
    try:
        frontier = store.frontier
        frontier.claim(RUN, [UrlTask(url="https://books.example/waiting", depth=1)], seeds=6, max_pages=100)
        frontier.complete(
            RUN,
            [
                FULL,
                PageResult("https://books.example/r", 0, "seed", "not_due", counts=RecordCounts(0, 0, 2), reused=True),
                PageResult("https://books.example/n", 0, "seed", "not_modified", counts=RecordCounts(0, 0, 1)),
                PageResult("https://books.example/e", 0, "seed", "fetched", digests=bytes(16)),  # no records
                PageResult("https://books.example/f", 0, "seed", "failed", status=500, digests=bytes(16)),
                PageResult("https://books.example/s", 0, "seed", "skipped", reason="robots.txt disallows"),
            ],
        )
        held = list(frontier.held_digests(RUN))
        assert held == list(_generic_digests(frontier, RUN))
        assert held.count(b"") == 2  # the reused pages that kept no digests: counted as unknown
        assert FULL.digests in held
        halves = [list(frontier.held_digests(RUN, shard=Shard(i, 2))) for i in range(2)]
        assert halves[0] + halves[1] == held
    finally:
        store.close()


def _night_two(tmp_path: Path, pages: int) -> tuple[Path, LocalStore, str, Any]:
    """A first synthetic night, finalized; a second night over the same URLs with the first as its catalog."""
    specs, store, first = _synthetic(tmp_path, pages)
    services = store.services(
        specs, LocalFleet(specs, tmp_path / "state").tuning, finalize_later=_never, continue_start=_never
    )
    assert finalize_run(synthetic.CRAWL, first, services, settled=True) is not None
    second = synthetic.write_run(store, pages, night=2, catalog_run=first)
    return specs, store, second, services


def test_finalizing_a_night_decodes_no_result_of_its_catalog_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the catalog run's every result decoded too (``codec.result_from_plain``), for its digests."""
    _, store, run_id, services = _night_two(tmp_path, 300)
    decoded = 0
    real = codec.result_from_plain

    def counting(plain: Any) -> PageResult:
        nonlocal decoded
        decoded += 1
        return real(plain)

    try:
        monkeypatch.setattr(codec, "result_from_plain", counting)
        done = finalize_run(synthetic.CRAWL, run_id, services, settled=True)
    finally:
        store.close()
    assert done is not None
    summary = done.summary.to_json()
    assert summary["pages"]["not_modified"] > 100
    assert decoded == 300  # this run's own URLs, once each (the settled run's one scan)


def test_a_night_finalized_from_held_digests_writes_what_decoding_the_catalog_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, store, run_id, services = _night_two(tmp_path, 400)
    try:
        done = finalize_run(synthetic.CRAWL, run_id, services, settled=True)
        assert done is not None
        assert done.summary.to_json()["records"]["gone"] > 0
        held = _outputs(tmp_path)
        run = services.ledger.get_run(synthetic.CRAWL, run_id)
        assert run is not None
        monkeypatch.setattr(SqliteFrontier, "held_digests", _generic_digests)
        rebuild_output(services, run, services.spec(synthetic.CRAWL))
        decoding = _outputs(tmp_path)
    finally:
        store.close()
    assert held == decoding


def test_the_local_frontier_pages_its_reads_alike_for_scan_and_held_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both reads page through the run by hash (one paged-query helper): a page of 2 rows gives what one read does."""
    store = LocalStore.open(tmp_path / "state")
    try:
        frontier = store.frontier
        results = [
            PageResult(
                f"https://books.example/{n}", 0, "seed", "fetched", counts=RecordCounts(1), digests=bytes([n]) * 16
            )
            for n in range(9)
        ]
        frontier.complete(RUN, [*results, PageResult("https://books.example/x", 0, "seed", "failed", status=500)])
        whole = (list(frontier.scan(RUN)), list(frontier.held_digests(RUN)))
        reads: list[tuple[Any, ...]] = []
        execute = frontier._db.reading

        def counted() -> Any:
            reads.append(())
            return execute()

        monkeypatch.setattr("sluice.adapters.local.frontier._PAGE", 2)
        monkeypatch.setattr(frontier._db, "reading", counted)
        assert (list(frontier.scan(RUN)), list(frontier.held_digests(RUN))) == whole
        assert len(reads) == (5 + 1) + (5 + 1)  # 10 rows then 9: five pages each, and the empty read that ends it
        assert sorted(whole[1]) == sorted(r.digests for r in results)
    finally:
        store.close()

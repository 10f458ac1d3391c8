"""What `sluice run` holds while it writes a run's output does not grow with the run.

On Lambda each finalize shard task is an invocation of its own; the local fleet runs every task in its
one process, so it finalizes in small shards (a task holds its shard's pages while it runs), two at a
time, and its Parquet copy writes bounded row groups (DuckDB holds a whole group before it writes it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from sluice.adapters.local import LocalStore
from sluice.domain.pages import UrlEntry
from sluice.domain.shards import Shard
from sluice.pipeline.finalize.driver import finalize_run
from sluice.ports import Frontier
from sluice.spec import load_spec
from sluice_tools import synthetic
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.parquet import write_parquet


class CountingFrontier:
    """The store's frontier, counting the URL entries each scan of a run yields (what a shard task reads)."""

    def __init__(self, frontier: Frontier, run_id: str) -> None:
        self.frontier, self.run_id = frontier, run_id
        self.scanned: list[int] = []

    def scan(self, run_id: str, *, consistent: bool = True, shard: Shard | None = None) -> Iterator[UrlEntry]:
        count = 0
        for entry in self.frontier.scan(run_id, consistent=consistent, shard=shard):
            count += 1
            yield entry
        if run_id == self.run_id:
            self.scanned.append(count)

    def scan_sized(self, run_id: str, *, shard: Shard | None = None) -> Iterator[tuple[UrlEntry, int]]:
        count = 0
        for sized in self.frontier.scan_sized(run_id, shard=shard):
            count += 1
            yield sized
        if run_id == self.run_id:
            self.scanned.append(count)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.frontier, name)


def _never(_: dict[str, object]) -> None:
    raise AssertionError("no trigger in a synthetic run")


def test_the_local_fleet_finalizes_a_6000_page_run_in_tasks_of_at_most_2500_pages(tmp_path: Path) -> None:
    specs = tmp_path / "crawls"
    synthetic.write_spec(specs)
    fleet = LocalFleet(specs, tmp_path / "state")
    store = LocalStore.open(tmp_path / "state")
    try:
        run_id = synthetic.write_run(store, 6000)
        counting = CountingFrontier(store.frontier, run_id)
        services = dataclasses.replace(
            store.services(specs, fleet.tuning, finalize_later=_never, continue_start=_never), frontier=counting
        )
        done = finalize_run(synthetic.CRAWL, run_id, services)
    finally:
        store.close()

    assert done is not None
    summary = done.summary.to_json()
    assert summary["finalize_shards"] == 4
    # Each shard's URLs read twice (the scan, then the keys phase's second scan), never the run's 6,000 at once.
    assert len(counting.scanned) == 8
    assert sum(counting.scanned) == 2 * 6000
    assert max(counting.scanned) <= 2500
    assert summary["pages"]["fetched"] == 6000 - summary["pages"]["failed"] - summary["pages"]["skipped"]


def test_the_parquet_copy_of_44000_records_is_written_in_row_groups_of_about_20000_rows(tmp_path: Path) -> None:
    specs = tmp_path / "crawls"
    synthetic.write_spec(specs)
    store = LocalStore.open(tmp_path / "state")
    try:
        run_id = synthetic.write_run(store, 4500)
        services = store.services(
            specs, LocalFleet(specs, tmp_path / "state").tuning, finalize_later=_never, continue_start=_never
        )
        done = finalize_run(synthetic.CRAWL, run_id, services)
    finally:
        store.close()
    assert done is not None
    total = int(done.summary.to_json()["records"]["total"])
    assert total > 40_000

    written = write_parquet(load_spec(specs / f"{synthetic.CRAWL}.yaml"), tmp_path / "state" / "objects", run_id)

    assert written.rows == total
    groups = duckdb.execute(
        "SELECT row_group_id, any_value(row_group_num_rows) FROM parquet_metadata(?) GROUP BY row_group_id",
        [str(written.folder / "records.parquet")],
    ).fetchall()
    sizes = sorted(int(rows) for _, rows in groups)
    assert sum(sizes) == total
    assert len(sizes) >= 2
    assert max(sizes) < 25_000  # DuckDB closes a group at a vector (2,048 rows) past 20,000; at its default, one group

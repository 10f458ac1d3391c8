"""A settled finalize (``finalize_run(settled=True)``): the run scanned once, its output the same as two scans give.

The local runner finalizes a run when its queue is empty and its workers idle: nothing can add to the run
while it is counted, so the keys phase's second scan (which catches a page counted mid-scan) proves nothing
there. The same run, copied, is finalized both ways; its summary and every output file must match.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.adapters.local import LocalStore
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.domain.layout import run_prefix
from sluice.domain.runs import RunState
from sluice.domain.shards import shard_count
from sluice.messages import ShardTask, parse_body
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.services import Tuning
from sluice.spec import parse_spec
from sluice_tools import synthetic
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner.local import LocalFleet

from .conftest import SpecData

PAGES = 600
SHARD_PAGES = 100  # eight shards
VOLATILE = ("finalized_at", "finalize_s", "cost")
"""Summary fields that differ between any two finalizings of one run (its time, and what that time cost)."""


def _never(_: Any) -> None:
    raise AssertionError("not called by an inline finalize")


@pytest.fixture
def drained(tmp_path: Path) -> tuple[Path, Path, str]:
    """A synthetic night-2 run (reused, changed and gone pages against night 1's output), drained, not finalized."""
    specs, state = tmp_path / "crawls", tmp_path / "state"
    synthetic.write_spec(specs)
    store = LocalStore.open(state)
    try:
        services = store.services(specs, _tuning(), finalize_later=_never, continue_start=_never)
        first = synthetic.write_run(store, PAGES)
        assert finalize_run(synthetic.CRAWL, first, services) is not None
        run_id = synthetic.write_run(store, PAGES, night=2, catalog_run=first)
    finally:
        store.close()
    return specs, state, run_id


def _tuning() -> Tuning:
    return Tuning(finalize_shard_pages=SHARD_PAGES, finalize_workers=2)


def _finalize(specs: Path, state: Path, run_id: str, *, settled: bool) -> int:
    """Finalize the run in ``state`` (settled or not); how many scans of the run's URLs it made."""
    store = LocalStore.open(state)
    scans = 0
    real, real_sized = type(store.frontier).scan, type(store.frontier).scan_sized

    def scan(self: Any, scanned: str, **kwargs: Any) -> Iterator[Any]:
        nonlocal scans
        scans += scanned == run_id
        return real(self, scanned, **kwargs)

    def scan_sized(self: Any, scanned: str, **kwargs: Any) -> Iterator[Any]:
        nonlocal scans
        scans += scanned == run_id
        return real_sized(self, scanned, **kwargs)

    try:
        services = store.services(specs, _tuning(), finalize_later=_never, continue_start=_never)
        type(store.frontier).scan = scan  # type: ignore[method-assign,assignment]
        type(store.frontier).scan_sized = scan_sized  # type: ignore[method-assign,assignment]
        try:
            done = finalize_run(synthetic.CRAWL, run_id, services, settled=settled)
        finally:
            type(store.frontier).scan = real  # type: ignore[method-assign]
            type(store.frontier).scan_sized = real_sized  # type: ignore[method-assign]
        assert done is not None
        assert done.summary.status == "finished"
    finally:
        store.close()
    return scans


def _output(state: Path, run_id: str) -> dict[str, Any]:
    """Every file the run's output holds, by name: the summary without its volatile fields, the rest as bytes."""
    folder = state / "objects" / run_prefix(synthetic.CRAWL, run_id)
    files: dict[str, Any] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        data = path.read_bytes()
        if name == "summary.json":
            summary = json.loads(data.replace(str(state).encode(), b"STATE"))  # where its outputs are
            for field in VOLATILE:
                summary.pop(field)
            files[name] = summary
        else:
            files[name] = data
    return files


def test_a_settled_run_is_scanned_once_and_finalized_exactly_as_with_two_scans(
    tmp_path: Path, drained: tuple[Path, Path, str]
) -> None:
    specs, state, run_id = drained
    twin = tmp_path / "twin"
    shutil.copytree(state, twin)

    once = _finalize(specs, state, run_id, settled=True)
    twice = _finalize(specs, twin, run_id, settled=False)

    shards = shard_count(PAGES, SHARD_PAGES, _tuning().finalize_max_shards)
    assert shards > 1
    assert (once, twice) == (shards, 2 * shards)
    settled, unsettled = _output(state, run_id), _output(twin, run_id)
    assert sorted(settled) == sorted(unsettled)
    assert {"summary.json", "manifest.json"} <= set(settled)
    assert any(name.startswith("records/") for name in settled)
    assert settled == unsettled


def test_a_settled_attempt_keeps_its_flag_through_a_queued_task() -> None:
    from sluice.pipeline.finalize.shards import Attempt

    attempt = Attempt("books", "20261203T070000Z-abcdef", "1796281608-abcdef", 4, settled=True)
    assert Attempt.from_plain(attempt.as_plain()) == attempt
    task = parse_body(ShardTask, attempt.as_plain() | {"phase": "keys", "shard": 1})
    assert Attempt.from_plain(task.attempt_plain()) == attempt
    assert not Attempt.from_plain({"crawl": "c", "run_id": "r", "attempt": "a", "count": 4}).settled


def test_a_settled_attempt_still_waits_for_a_run_that_is_not_drained(tmp_path: Path) -> None:
    """Settled says nothing moves; it does not say every page is done: a run with a page left is not finalized."""
    specs, state = tmp_path / "crawls", tmp_path / "state"
    synthetic.write_spec(specs)
    store = LocalStore.open(state)
    try:
        services = store.services(specs, _tuning(), finalize_later=_never, continue_start=_never)
        run_id = synthetic.write_run(store, PAGES)
        store.ledger.set_seeds(synthetic.CRAWL, run_id, PAGES + 1)  # one seed without its result
        assert finalize_run(synthetic.CRAWL, run_id, services, settled=True) is None
        run = store.ledger.get_run(synthetic.CRAWL, run_id)
        assert isinstance(run, RunState)
        assert run.status == "running"
    finally:
        store.close()


@pytest.mark.parametrize("spread", [1, 2], ids=["one-process", "two-processes"])
def test_sluice_run_finalizes_its_quiet_run_settled(
    tmp_path: Path, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch, spread: int
) -> None:
    """``sluice run`` finalizes when its queue is empty and its workers idle: one scan of the run's URLs.

    On one process too, where the last batch asks to finalize while it still holds its messages: the request
    waits for the run to be quiet (taken at once, it was finalized unsettled, scanned twice)."""
    scans: list[str] = []
    real = SqliteFrontier.scan

    def scan(self: SqliteFrontier, run_id: str, **kwargs: Any) -> Iterator[Any]:
        scans.append(run_id)
        return real(self, run_id, **kwargs)

    real_sized = SqliteFrontier.scan_sized

    def scan_sized(self: SqliteFrontier, run_id: str, **kwargs: Any) -> Iterator[Any]:
        scans.append(run_id)
        return real_sized(self, run_id, **kwargs)

    monkeypatch.setattr(SqliteFrontier, "scan", scan)
    monkeypatch.setattr(SqliteFrontier, "scan_sized", scan_sized)
    with running_demo_site(books=100) as site:
        data = books_spec("quiet", site.base_url, pages=5, max_depth=0)
        crawls = tmp_path / "crawls"
        crawls.mkdir()
        (crawls / "quiet.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        run = LocalFleet(crawls, tmp_path / "state", workers=2, processes=spread, allow_loopback=True).run(
            parse_spec(data)
        )
    assert run.summary.pages.fetched == 5
    assert scans.count(run.run_id) == 1  # one shard, scanned once (twice before: the keys phase scanned again)

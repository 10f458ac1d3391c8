"""A local run's cycle collector: run rarely during the run, and as it was once the run ends."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import yaml

from sluice.collector import YOUNG_OBJECTS, collected_rarely
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.runner.local import LocalFleet

from .conftest import SpecData


class _Alive:
    pass


def test_a_run_collects_rarely_and_puts_the_collector_back() -> None:
    before = gc.get_threshold()
    alive = _Alive()  # a container alive before the run: frozen during it
    with collected_rarely():
        assert gc.get_threshold() == (YOUNG_OBJECTS, *before[1:])
        assert gc.get_freeze_count() > 0
        assert not any(o is alive for o in gc.get_objects())  # frozen: no collection walks it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert any(o is alive for o in gc.get_objects())


def test_a_run_that_fails_puts_the_collector_back() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collected_rarely():
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_stretches_that_overlap_keep_the_outermost_setting_until_it_ends() -> None:
    before = gc.get_threshold()
    outer = collected_rarely()
    outer.__enter__()
    with collected_rarely():  # a crawl inside a run, a second worker thread
        assert gc.get_threshold()[0] == YOUNG_OBJECTS
    assert gc.get_threshold()[0] == YOUNG_OBJECTS  # the inner one ending undid nothing
    assert gc.get_freeze_count() > 0
    outer.__exit__(None, None, None)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_sluice_run_crawls_with_the_collector_run_rarely(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = books_spec("books", site.base_url, pages=2)
    spec = parse_spec(data)
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / "books.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    seen: list[tuple[int, int]] = []
    crawl = LocalFleet._run

    def watched(self: LocalFleet, *args: object, **kwargs: object) -> object:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return crawl(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LocalFleet, "_run", watched)
    before = gc.get_threshold()
    run = LocalFleet(crawls, tmp_path / "state", workers=2, allow_loopback=True).run(spec)
    assert run.summary.pages.fetched == run.summary.pages.enqueued > 0
    assert len(seen) == 1
    assert seen[0][0] == YOUNG_OBJECTS
    assert seen[0][1] > 0
    assert gc.get_threshold() == before

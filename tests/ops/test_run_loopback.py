"""`sluice run` of a spec on loopback without --allow-loopback: refused before a run is opened, as README says."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice_tools.runner import local
from sluice_tools.runner.session import StateInUse

from .conftest import Cli

REPO = Path(__file__).resolve().parents[2]


def test_a_spec_whose_seeds_are_all_on_loopback_is_refused_before_a_run_is_opened(tmp_path: Path, sluice: Cli) -> None:
    """It opened a run, skipped every page (a WARNING a page), finalized it UNHEALTHY, and that empty run became
    the next run's catalog baseline."""
    state = tmp_path / "state"
    code, out, err = sluice("run", str(REPO / "crawls" / "demo-books.yaml"), "--state", str(state))
    assert code == 2
    assert out == ""
    assert "refused: every seed of crawl 'demo-books' is on loopback" in err
    assert "seeds.template (http://127.0.0.1:8710/catalogue/page-{n}.html)" in err
    assert "Add --allow-loopback" in err
    assert not (state / "sluice.db").exists()  # no run opened, no state written


def test_a_spec_with_some_seeds_on_loopback_gets_a_note(
    tmp_path: Path, sluice: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "mixed.yaml"
    spec.write_text(
        "name: mixed\nseeds:\n  urls: ['https://example.com/', 'http://localhost:8000/']\n"
        "extract:\n  item: body\n  fields:\n    title: {selector: 'h1::text'}\n",
        encoding="utf-8",
    )

    def stop(*args: object, **kwargs: object) -> None:
        raise StateInUse("stopped here: the run would start now")

    monkeypatch.setattr(local.LocalFleet, "run", stop)
    code, _, err = sluice("run", str(spec), "--state", str(tmp_path / "state"))
    assert code == 2
    assert "note: seeds.urls[1] (http://localhost:8000/) is on loopback: its pages are skipped" in err
    assert "stopped here: the run would start now" in err  # not refused for loopback: on to the run

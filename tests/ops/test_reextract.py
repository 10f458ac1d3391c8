"""`sluice reextract RUN`: night 3 repaired from its archive, on the local store and on a stage (moto), no request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from infra.config import DEFAULT

from sluice.adapters.aws.objects import S3Objects
from sluice.pipeline.finalize.columnar_state import copy_state_key
from sluice.spec import load_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate import state
from sluice_tools.emulate.resources import ACCOUNT, REGION
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.runner.demo import BROKEN_SELECTOR, FIXED_SELECTOR
from sluice_tools.runner.summary import as_json

from .conftest import Cli, LocalCrawls, aws_stage

PAGES = 3
BOOKS = (PAGES + 1) * 20
"""The last seed's next link is followed one hop: four listing pages of 20 books."""


@dataclass
class Broken:
    """Three runs of the demo crawl, the third after the redesign broke its price selector."""

    where: list[str]
    results: list[dict[str, Any]]
    fixed: Path
    """A copy of the spec with the selector the redesigned site needs."""
    kind: str


@pytest.fixture(params=["local", "stage"])
def broken(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    local: LocalCrawls,
    site: RunningDemoSite,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Broken]:
    local.shrink(PAGES)
    spec_text = (local.specs / "demo-books.yaml").read_text(encoding="utf-8")
    fixed = tmp_path / "fixed" / "demo-books.yaml"
    fixed.parent.mkdir()
    fixed.write_text(spec_text.replace(BROKEN_SELECTOR, FIXED_SELECTOR), encoding="utf-8")
    if request.param == "local":
        results = [local.run(), local.run()]
        site.set_catalogue(broken_selector=True)
        results.append(local.run())
        yield Broken(["--state", str(local.state), "--specs", str(local.specs)], results, fixed, "local")
        return
    runner = EmulatedRunner(local.specs, tmp_path / "moto", workers=2, allow_loopback=True)
    spec = load_spec(local.specs / "demo-books.yaml")
    runs = [runner.run(spec), runner.run(spec)]
    site.set_catalogue(broken_selector=True)
    runs.append(runner.run(spec))
    with aws_stage(local.specs, monkeypatch) as settings:
        state.load(settings, tmp_path / "moto")
        yield Broken(["--stage", "--specs", str(local.specs)], [as_json(r) for r in runs], fixed, "stage")


def test_reextract_repairs_night_3_from_the_archive_without_a_request(
    broken: Broken, sluice: Cli, site: RunningDemoSite
) -> None:
    night3 = broken.results[2]["run_id"]
    assert sluice.json("show", night3, *broken.where, "--json")["summary"]["verdict"]["healthy"] is False
    before = site.stats.total
    code, out, err = sluice("reextract", night3, "--spec", str(broken.fixed), *broken.where)
    assert code == 0, err
    assert site.stats.total == before  # not one request reached the site
    assert out.startswith(f"run {night3} of demo-books: {PAGES + 1} page(s) re-extracted from the archive")
    assert "no request sent, no link followed" in out
    assert f"records  {BOOKS} in the output" in out
    assert "verdict  healthy" in out
    code, text, _ = sluice("show", night3, *broken.where)
    assert code == 0
    assert f"  rebuilt  {PAGES + 1} page(s) re-extracted from the archive at " in text
    # The night it ran, the run was UNHEALTHY: show says so beside the verdict now (it said HEALTHY alone).
    alerts = ", ".join(a["check"] for a in broken.results[2]["verdict"]["alerts"])
    assert text.splitlines()[0] == (
        f"run {night3} of demo-books: finished, HEALTHY since its repair, UNHEALTHY when it ran ({alerts})"
    )
    assert "  as run   UNHEALTHY, 0 records (the verdict and records of the night it ran, before the repair)" in text
    shown = sluice.json("show", night3, *broken.where, "--json")
    assert shown["summary"]["verdict"]["healthy"] is True
    assert shown["summary"]["records"]["total"] == BOOKS
    assert shown["summary"]["reextracted"]["from_runs"] == [night3]
    rows = sluice.json("runs", "demo-books", *broken.where, "--json")
    assert [r["healthy"] for r in rows] == [True, True, True]  # the ledger's verdict is the repaired one
    # Night 3 had no records, so no Parquet copy: the rebuilt records get one (locally written, on AWS started).
    (parquet,) = [line for line in text.splitlines() if line.startswith("  parquet ")]
    if broken.kind == "local":
        assert parquet.endswith(f"/parquet ({BOOKS} rows)")
    else:
        assert "(Athena UNLOAD " in parquet
        stored = S3Objects(DEFAULT.bucket_name(ACCOUNT, REGION)).get(copy_state_key("demo-books", night3))
        copy = json.loads(stored or b"{}")
        assert copy["generation"].startswith("reextract-")
        assert copy["tables"][0]["table"] == "demo_books"


def test_reextract_refuses_another_crawls_spec_and_names_an_unknown_run(broken: Broken, sluice: Cli) -> None:
    night3 = broken.results[2]["run_id"]
    other = broken.fixed.parent / "other.yaml"
    other.write_text(broken.fixed.read_text(encoding="utf-8").replace("name: demo-books", "name: other"))
    code, out, err = sluice("reextract", night3, "--spec", str(other), *broken.where)
    assert (code, out) == (2, "")
    assert "refused: the spec is crawl 'other'" in err
    code, out, err = sluice("reextract", "20200101T000000Z-000000", *broken.where)
    assert (code, out) == (2, "")
    assert "no run 20200101T000000Z-000000" in err


def test_reextract_that_would_lose_a_healthy_runs_records_is_refused_unless_forced(
    broken: Broken, sluice: Cli, site: RunningDemoSite
) -> None:
    """Night 1 re-extracted with the spec fixed for the redesigned site: a HEALTHY run of 80 records became
    UNHEALTHY with 0, without a word before it was done."""
    night1 = broken.results[0]["run_id"]
    before = site.stats.total
    with_fixed = ["--spec", str(broken.fixed), *broken.where]
    code, out, err = sluice("reextract", night1, *with_fixed, "--dry-run")
    assert code == 1, err
    assert out.startswith(f"dry run: re-extracting run {night1} of demo-books would re-extract {PAGES + 1} page(s)")
    assert f"0 records where it has {BOOKS} now (healthy)" in out
    assert "verdict UNHEALTHY (records_nonzero, record_count_drop)" in out
    code, out, err = sluice("reextract", night1, *with_fixed)
    assert (code, out) == (2, "")
    assert f"refused: re-extracting run {night1} of demo-books would re-extract" in err
    assert "--force" in err
    shown = sluice.json("show", night1, *broken.where, "--json")["summary"]
    assert (shown["verdict"]["healthy"], shown["records"]["total"], shown.get("reextracted")) == (True, BOOKS, None)
    code, out, err = sluice("reextract", night1, *with_fixed, "--force")
    assert code == 1, err
    assert "verdict  UNHEALTHY (records_nonzero" in out
    assert sluice.json("show", night1, *broken.where, "--json")["summary"]["records"]["total"] == 0
    assert site.stats.total == before  # not one request reached the site

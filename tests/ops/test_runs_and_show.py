"""`sluice runs NAME` and `sluice show RUN`: the same answers from the local store and from a stage on moto."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sluice.adapters.local import LocalStore
from sluice.domain.layout import records_prefix, summary_key
from sluice.spec import load_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate import state
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.runner.session import exclusive, remember_flags
from sluice_tools.runner.summary import as_json

from .conftest import Cli, LocalCrawls, aws_stage

PAGES = 5
LISTED = PAGES + 1
"""The last seed's next link is followed one hop: six listing pages of 20 books."""
BOOKS = LISTED * 20


@dataclass
class Runs:
    """Three runs of the demo crawl (the third after the price selector broke), and where the CLI finds them."""

    where: list[str]
    results: list[dict[str, Any]]
    """`sluice run --json` of each, oldest first."""
    kind: str


@pytest.fixture(params=["local", "stage"])
def three_runs(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    local: LocalCrawls,
    site: RunningDemoSite,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Runs]:
    local.shrink(PAGES)
    if request.param == "local":
        results = [local.run(), local.run()]
        site.set_catalogue(broken_selector=True)
        results.append(local.run())
        yield Runs(["--state", str(local.state), "--specs", str(local.specs)], results, "local")
        return
    # The real handlers on moto, then their tables and objects loaded into the moto the CLI reads.
    runner = EmulatedRunner(local.specs, tmp_path / "moto", workers=2, allow_loopback=True)
    spec = load_spec(local.specs / "demo-books.yaml")
    runs = [runner.run(spec), runner.run(spec)]
    site.set_catalogue(broken_selector=True)
    runs.append(runner.run(spec))
    with aws_stage(local.specs, monkeypatch) as settings:
        state.load(settings, tmp_path / "moto")
        yield Runs(["--stage", "--specs", str(local.specs)], [as_json(r) for r in runs], "stage")


def test_runs_lists_the_last_runs_newest_first_with_their_verdicts(three_runs: Runs, sluice: Cli) -> None:
    rows = sluice.json("runs", "demo-books", *three_runs.where, "--json")
    assert [r["run_id"] for r in rows] == [r["run_id"] for r in reversed(three_runs.results)]
    assert [r["status"] for r in rows] == ["finished"] * 3
    assert [r["healthy"] for r in rows] == [False, True, True]
    assert [r["records"] for r in rows] == [0, BOOKS, BOOKS]
    assert [r["pages"] for r in rows] == [LISTED] * 3
    assert "record_count_drop" in rows[0]["alerts"]
    assert all(r["cost_usd"] > 0 and r["duration_s"] >= 0 for r in rows)

    code, table, _ = sluice("runs", "demo-books", *three_runs.where, "--limit", "2")
    assert code == 0
    header, _rule, newest, older, count = table.splitlines()
    assert header.split()[:4] == ["run", "started", "(UTC)", "status"]
    assert newest.startswith(three_runs.results[2]["run_id"])
    assert "UNHEALTHY (records_nonzero, record_count_drop)" in newest
    assert " healthy " in older
    assert f" {BOOKS} " in older
    assert count == "(2 rows)"


def test_runs_of_an_unknown_crawl_names_the_crawls_there_are(three_runs: Runs, sluice: Cli) -> None:
    code, out, err = sluice("runs", "demo-bookz", *three_runs.where)
    assert (code, out) == (2, "")
    assert "no crawl 'demo-bookz'" in err
    assert "demo-books" in err


def test_show_gives_the_summary_failed_checks_null_rates_and_outputs(three_runs: Runs, sluice: Cli) -> None:
    broken = three_runs.results[2]
    code, text, _ = sluice("show", broken["run_id"], *three_runs.where)
    assert code == 0
    assert text.startswith(f"run {broken['run_id']} of demo-books: finished, UNHEALTHY")
    assert "ALERT record_count_drop" in text
    assert "ALERT records_nonzero" in text
    assert "  egress   direct: no fixed address, no proxy" in text.splitlines()
    assert "nulls    price missing in 100% of items" in text
    assert f"dropped  records without a required field: price missing x{BOOKS}" in text
    outputs = {line.split()[0]: line.split(maxsplit=1)[1] for line in text.splitlines()[-4:]}
    if three_runs.kind == "local":
        assert Path(outputs["summary"]).is_file()
        assert Path(outputs["logs"]).is_file()
    else:
        assert outputs["summary"].startswith("s3://sluice-dev-records-123456789012-us-east-1/runs/crawl=demo-books/")
        assert f"sluice logs {broken['run_id']} --stage dev" in outputs["logs"]

    healthy = three_runs.results[0]
    shown = sluice.json("show", healthy["run_id"], *three_runs.where, "--json")
    assert shown["summary"]["records"]["total"] == BOOKS
    assert shown["summary"]["verdict"]["healthy"] is True
    assert shown["summary"]["egress"] == {"route": "direct"}
    assert shown["run"]["run_id"] == healthy["run_id"]
    text = sluice("show", healthy["run_id"], *three_runs.where)[1]
    assert "nulls    none" in text
    (parquet,) = [line.split(maxsplit=1)[1] for line in text.splitlines() if line.startswith("  parquet ")]
    if three_runs.kind == "local":
        assert parquet.endswith(f"/parquet ({BOOKS} rows)")
    else:  # the UNLOAD the finalizer started (the emulated runs' sweep never came to read it back)
        bucket = "s3://sluice-dev-records-123456789012-us-east-1"
        assert parquet.startswith(f"{bucket}/runs/crawl=demo-books/run={healthy['run_id']}/parquet/ (Athena UNLOAD ")
        assert "; the sweep records how it ends)" in parquet
    shown_broken = sluice("show", broken["run_id"], *three_runs.where)[1]
    assert "parquet" not in shown_broken  # no records, no copy


def test_show_of_an_unknown_run_is_refused(three_runs: Runs, sluice: Cli) -> None:
    code, _, err = sluice("show", "20200101T000000Z-000000", *three_runs.where)
    assert code == 2
    assert "no run 20200101T000000Z-000000" in err
    assert "demo-books" in err


def _open_run(local: LocalCrawls) -> str:
    """A run in flight in the ledger, as a command running it (or killed while it did) leaves it."""
    store = LocalStore.open(local.state)
    try:
        open_run = store.ledger.open_run("demo-books", "digest", timedelta(hours=1), trigger=None, catalog_run=None)
        store.ledger.set_seeds("demo-books", open_run.run_id, 50)
    finally:
        store.close()
    return open_run.run_id


def test_show_of_a_run_in_flight_says_how_far_it_got(local: LocalCrawls, sluice: Cli) -> None:
    local.run()
    run_id = _open_run(local)
    with exclusive(local.state):  # the command running it holds the state folder, as `sluice run` does
        code, text, _ = sluice("show", run_id, "--state", str(local.state))
        rows = sluice.json("runs", "demo-books", "--state", str(local.state), "--json")
    assert code == 0
    assert text.splitlines()[0] == f"run {run_id} of demo-books: running (its summary is written when it is finalized)"
    assert "so far   0 of 50 pages done" in text
    assert "interrupted" not in text
    assert (rows[0]["status"], rows[0]["verdict"], rows[0]["records"]) == ("running", "-", None)


def test_a_run_no_command_holds_is_interrupted_with_how_to_resume_it(local: LocalCrawls, sluice: Cli) -> None:
    """A command killed (kill -9) mid-run leaves the ledger saying running and no process holding the folder."""
    local.run()
    run_id = _open_run(local)
    where = ["--state", str(local.state), "--specs", str(local.specs)]
    resume = f"`sluice run {local.specs}/demo-books.yaml --state {local.state}` resumes it"
    code, text, _ = sluice("show", run_id, *where)
    assert code == 0
    assert (
        text.splitlines()[0] == f"run {run_id} of demo-books: interrupted (its summary is written when it is finalized)"
    )
    assert resume in text.splitlines()[1]
    assert "--restart" in text.splitlines()[1]
    code, table, err = sluice("runs", "demo-books", *where)
    assert code == 0
    assert re.search(rf"{run_id} .* interrupted ", table)
    assert f"note: run {run_id} interrupted: no sluice command is running it" in err
    assert resume in err
    rows = sluice.json("runs", "demo-books", *where, "--json")
    assert [r["status"] for r in rows] == ["interrupted", "finished"]


def test_the_resume_hint_gives_the_fetch_flags_the_run_was_started_with(local: LocalCrawls, sluice: Cli) -> None:
    """The hint left out --allow-loopback: run as printed, the resume skipped every page left as loopback."""
    local.run()
    run_id = _open_run(local)
    remember_flags(local.state, "demo-books", run_id, ["--allow-loopback"])
    where = ["--state", str(local.state), "--specs", str(local.specs)]
    resume = f"`sluice run {local.specs}/demo-books.yaml --state {local.state} --allow-loopback` resumes it"
    code, text, _ = sluice("show", run_id, *where)
    assert code == 0
    assert resume in text.splitlines()[1]
    code, _, err = sluice("runs", "demo-books", *where)
    assert code == 0
    assert resume in err


def test_report_draws_the_same_runs_from_either_place(three_runs: Runs, sluice: Cli, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    code, printed, err = sluice("report", "demo-books", *three_runs.where, "--out", str(out))
    assert code == 0, err
    assert printed.strip() == str(out)
    html = out.read_text(encoding="utf-8")
    ids = [r["run_id"] for r in three_runs.results]
    assert re.findall(r'<section class="run (\w+)" id="run-([^"]+)"', html) == [
        ("healthy", ids[0]),
        ("healthy", ids[1]),
        ("unhealthy", ids[2]),
    ]
    assert re.findall(r'<li class="alert" data-check="(\w+)">', html) == ["records_nonzero", "record_count_drop"]
    records = html.split('data-chart="records"')[1].split("</figure>")[0]
    points = records.split("points_marks")[1].split("</g>")[0]
    assert points.count("<path") == 3
    assert records.count('xlink:href="#run-') == 3 + 1  # each point, and the alert's rule


def _emulated_run(local: LocalCrawls, sluice: Cli) -> tuple[str, list[str], Path]:
    """A one-page run of demo-books made with --emulate-aws: its id, the --state/--specs arguments, its moto folder."""
    local.shrink(1)
    spec = str(local.specs / "demo-books.yaml")
    where = ["--state", str(local.state), "--specs", str(local.specs)]
    code, out, err = sluice("run", spec, *where[:2], "--allow-loopback", "--emulate-aws", "--json", "--workers", "2")
    assert code == 0, err
    return json.loads(out)["run_id"], where, local.state / "moto"


def test_show_of_an_emulated_run_says_where_its_data_is(local: LocalCrawls, sluice: Cli) -> None:
    """`sluice run --emulate-aws` keeps its state in STATE/moto/, not in the local store `show` reads: `show` said
    "no runs in STATE/" (or "no run RUN"), naming nowhere the run's data is."""
    run_id, where, moto = _emulated_run(local, sluice)
    for _ in range(2):  # with no local run in the folder, then with one
        code, _, err = sluice("show", run_id, *where)
        assert code == 2
        assert f"run {run_id} was made with --emulate-aws: its data is in {moto}/" in err
        assert str(moto / "s3" / summary_key("demo-books", run_id)) in err
        assert str(moto / "s3" / records_prefix("demo-books", run_id)) in err
        local.run()


def test_runs_and_logs_of_an_emulated_state_say_where_its_runs_are(local: LocalCrawls, sluice: Cli) -> None:
    """`runs` and `logs` said "no runs in STATE/: `sluice run` keeps its state there (or pass --state)" of a
    state --state named, where the run had just printed `logs STATE/moto/logs/....jsonl`."""
    run_id, where, moto = _emulated_run(local, sluice)
    code, _, err = sluice("runs", "demo-books", *where)
    assert code == 2
    assert f"no local runs in {local.state}/: it holds runs made with --emulate-aws, kept in {moto}/" in err
    assert "or pass --state" not in err
    assert f"their logs are in {moto / 'logs'}/" in err
    code, _, err = sluice("logs", run_id, *where)
    assert code == 2
    assert f"run {run_id} was made with --emulate-aws: its data is in {moto}/" in err
    assert f"its log lines {moto / 'logs' / f'demo-books-{run_id}.jsonl'}" in err


def test_a_run_says_its_catalog_run_and_warns_when_that_one_was_unhealthy(
    local: LocalCrawls, site: RunningDemoSite, sluice: Cli
) -> None:
    """The catalog run is the last finished one, healthy or not (docs/spec.md): the night after a broken one
    counted its records against the broken night's, and nothing said which run that was or that it was broken."""
    local.shrink(2)
    first = local.run()["run_id"]
    site.set_catalogue(broken_selector=True)
    broken = local.run()
    assert broken["verdict"]["healthy"] is False
    alerts = ", ".join(a["check"] for a in broken["verdict"]["alerts"])
    site.set_catalogue(broken_selector=False)
    spec = str(local.specs / "demo-books.yaml")
    where = ["--state", str(local.state), "--specs", str(local.specs)]
    code, text, err = sluice("run", spec, *where[:2], "--allow-loopback", "--workers", "2")
    assert code in (0, 1), err
    after = re.search(r"^run (\S+) of demo-books", text, re.M)
    assert after is not None
    warning = (
        f"  WARNING  the catalog run {broken['run_id']} was UNHEALTHY ({alerts}): this run's seeds and counts came "
        "from its pages and records (a run's catalog is the last finished run, healthy or not)"
    )
    catalog = f"  previous run {broken['run_id']}: 0 records (the catalog run the changes are counted against)"
    assert warning in text.splitlines()
    assert catalog in text.splitlines()
    code, shown, _ = sluice("show", after.group(1), *where)
    assert code == 0
    assert warning in shown.splitlines()
    code, shown, _ = sluice("show", broken["run_id"], *where)  # its own catalog, night 1, was healthy
    assert code == 0
    assert f"  previous run {first}: " in shown
    assert "WARNING" not in shown

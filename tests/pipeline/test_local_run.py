"""`sluice run --json`: the promised output shape, the exit code of a verdict, and state kept between local runs."""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.config import DEFAULT

from sluice.spec import parse_spec
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import RunView

from .conftest import SpecData

CRAWL = "books"
PAGES = 5
BOOKS = 100


def sluice_run(spec: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = sluice_run_said(spec, state, capsys, *extra)
    return code, out


def sluice_run_said(
    spec: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The exit code, the one JSON object on stdout, and what stderr said of the run's files (``summary PATH``)."""
    code = main(["run", str(spec), "--allow-loopback", "--state", str(state), "--json", "--workers", "2", *extra])
    captured = capsys.readouterr()
    said = {}
    for line in captured.err.splitlines():
        name, _, where = line.partition(" ")
        if name in ("records", "summary", "logs", "parquet") and where.strip():
            said[name] = where.strip()
    return code, json.loads(captured.out), said


PAGE_KEYS = ("fetched", "not_modified", "failed", "skipped")
RECORD_KEYS = ("total", "new", "changed", "unchanged")


def pages_of(out: dict[str, Any]) -> dict[str, int]:
    return {k: out["pages"][k] for k in PAGE_KEYS}


def records_of(out: dict[str, Any]) -> dict[str, int]:
    return {k: out["records"][k] for k in RECORD_KEYS}


def output_lines(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record of a run's output folder (``outputs.records`` names the folder)."""
    folder = Path(out["outputs"]["records"])
    assert folder.is_dir()
    return [json.loads(line) for file in sorted(folder.glob("*.jsonl")) for line in file.read_text().splitlines()]


def stored_summary(state: Path, run_id: str) -> dict[str, Any]:
    """The run's summary.json, as the finalizer stored it in the state folder."""
    (path,) = state.rglob(f"run={run_id}/summary.json")
    stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return stored


def assert_shape(out: dict[str, Any], state: Path) -> None:
    assert out == stored_summary(state, out["run_id"])
    assert out["crawl"] == CRAWL
    assert out["status"] == "finished"
    lines = output_lines(out)
    assert len(lines) == out["records"]["total"]
    assert len({line["_key"] for line in lines}) == len(lines)


def test_sluice_run_json_prints_the_runs_summary_json_whole(
    tmp_path: Path, site: RunningDemoSite, books_spec: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script reading `sluice run --json` sees what summary.json says: that max_pages cut the crawl short, every
    check, the limits, the cost; and what only the command knows (where the files are) is said on stderr."""
    data = books_spec(CRAWL, site.base_url, pages=3, urls=["/no-such-page.html"], max_depth=2, max_pages=5)
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    state = tmp_path / "state"

    code, out, said = sluice_run_said(spec, state, capsys)

    stored = stored_summary(state, out["run_id"])
    assert out == stored
    assert stored["limits"]["max_pages"]["links_left"] > 0  # the cut is in both, not only in the file
    assert {c["check"] for c in out["verdict"]["checks"]} >= {"finished", "truncated", "error_rate"}
    assert out["pages"]["failed"] == 1
    assert {"cost", "blocked_hosts", "skips", "rejected", "egress", "finalize_shards"} <= set(out)
    assert code == 1  # the missing page fails the error rate ceiling: unhealthy, as the summary says
    assert json.loads(Path(said["summary"]).read_text()) == out
    assert Path(said["records"]).is_dir()


def test_sluice_run_json_keeps_state_between_runs_and_fails_on_an_unhealthy_verdict(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    data = books_spec(CRAWL, site.base_url)
    parse_spec(data)
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    state = tmp_path / "state"
    listings = [f"/catalogue/page-{n}.html" for n in range(1, PAGES + 1)]

    code, first = sluice_run(spec, state, capsys)
    assert code == 0
    assert_shape(first, state)
    assert pages_of(first) == {"fetched": PAGES, "not_modified": 0, "failed": 0, "skipped": 0}
    assert records_of(first) == {"total": BOOKS, "new": BOOKS, "changed": 0, "unchanged": 0}
    assert (first["verdict"]["healthy"], first["verdict"]["alerts"]) == (True, [])
    assert all(r.if_none_match is None for p in listings for r in site.stats.records(p))

    site.stats.reset()
    code, second = sluice_run(spec, state, capsys)
    assert code == 0
    assert_shape(second, state)
    assert second["run_id"] > first["run_id"]
    # The state folder carried the validators: every page was asked "changed since?" and answered 304.
    assert [len(site.stats.records(p)) for p in listings] == [1] * PAGES
    assert all(site.stats.records(p)[0].if_none_match for p in listings)
    assert all(site.stats.records(p)[0].status == 304 for p in listings)
    assert pages_of(second) == {"fetched": 0, "not_modified": PAGES, "failed": 0, "skipped": 0}
    assert records_of(second) == {"total": BOOKS, "new": 0, "changed": 0, "unchanged": BOOKS}
    assert second["previous_run"] == {"run_id": first["run_id"], "records": BOOKS}

    site.set_catalogue(books=BOOKS, broken_selector=True)
    code, third = sluice_run(spec, state, capsys)
    assert code == 1
    assert_shape(third, state)
    assert third["verdict"]["healthy"] is False
    assert "record_count_drop" in {a["check"] for a in third["verdict"]["alerts"]}
    assert third["records"]["total"] == 0


def test_sluice_run_emulating_aws_gives_the_same_run(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--emulate-aws`` runs the real handlers on moto: same outputs, same verdict, its own state folder."""
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(books_spec(CRAWL, site.base_url)), encoding="utf-8")
    state = tmp_path / "state"

    code, local, _ = sluice_run_said(spec, state, capsys)
    code_aws, aws, said = sluice_run_said(spec, state, capsys, "--emulate-aws")

    assert (code, code_aws) == (0, 0)
    assert aws == stored_summary(state / "moto", aws["run_id"])
    assert pages_of(aws) == pages_of(local) == {"fetched": PAGES, "not_modified": 0, "failed": 0, "skipped": 0}
    assert aws["records"] == local["records"]
    aws_lines = [
        json.loads(line) for f in sorted(Path(said["records"]).glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert sorted(r["_key"] for r in aws_lines) == sorted(r["_key"] for r in output_lines(local))
    assert Path(said["summary"]).is_relative_to(state / "moto")


@pytest.mark.parametrize("emulate", [False, True], ids=["local", "emulated"])
def test_the_progress_bar_ends_on_the_summarys_counts_when_the_site_is_down(
    tmp_path: Path, books_spec: SpecData, emulate: bool
) -> None:
    """A refused connection is retried, then counted failed: the last view says so, as the summary does."""
    with socket.socket() as probe:  # a port nothing listens on: the site is down
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    data = books_spec(CRAWL, down, pages=1, retry_times=0)
    spec = parse_spec(data)
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    views: list[RunView] = []
    once = replace(DEFAULT, max_receive_count=1)  # the first failure is the last: no waiting on redelivery
    if emulate:
        runner = EmulatedRunner(crawls, tmp_path / "moto", workers=1, allow_loopback=True, config=once)
        run = runner.run(spec, progress=views.append)
    else:
        fleet = LocalFleet(crawls, tmp_path / "state", workers=1, allow_loopback=True, config=once)
        run = fleet.run(spec, progress=views.append)
    assert run.summary.pages.failed == 1
    assert views[-1] == RunView(done=1, enqueued=1, records=0, failed=1)


@pytest.mark.parametrize("emulate", [False, True], ids=["local", "emulated"])
def test_robots_txt_is_asked_once_per_run_however_many_fetchers(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, emulate: bool
) -> None:
    """Four workers, each with its own robots cache, share one robots.txt answer through the run's store."""
    copies = [f"/catalogue/page-1.html?copy={n}" for n in range(40)]
    data = books_spec(CRAWL, site.base_url, pages=0, urls=copies, max_depth=0)
    spec = parse_spec(data)
    assert spec.politeness.obey_robots
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    site.stats.reset()
    one_each = replace(DEFAULT, batch_size=1, urls_per_message=1)  # 40 messages, handed out one at a time
    if emulate:
        run = EmulatedRunner(crawls, tmp_path / "moto", workers=4, allow_loopback=True, config=one_each).run(spec)
    else:
        state = tmp_path / "state"
        fleet = LocalFleet(crawls, state, workers=4, batch_messages=1, allow_loopback=True, config=one_each)
        run = fleet.run(spec)
    assert run.summary.pages.fetched == 40
    assert site.stats.count("/robots.txt") == 1


def test_a_seed_file_url_the_follow_rules_leave_out_is_skipped_naming_the_rule(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    """A seed file is read at the run's start, not when the spec is checked: its out-of-scope URLs are skipped,
    and the summary says which rule left each out, not only that it was out of scope."""
    data = books_spec(CRAWL, site.base_url, pages=0, urls=["/catalogue/page-1.html"], max_depth=0)
    data["seeds"]["file"] = "books-seeds.txt"
    data["follow"]["allowed_domains"] = ["127.0.0.1"]
    data["follow"]["deny"] = ["page-3"]
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    listing = "\n".join(f"{site.base_url}/catalogue/page-{n}.html" for n in (2, 3))
    (spec.parent / "books-seeds.txt").write_text(listing + "\n", encoding="utf-8")
    _, out = sluice_run(spec, tmp_path / "state", capsys)
    assert out["pages"]["fetched"] == 2
    assert out["skips"] == {"out of the crawl's scope: matches follow.deny 'page-3'": 1}


@pytest.mark.parametrize("emulate", [False, True], ids=["local", "emulated"])
def test_sluice_run_takes_a_seed_file_from_beside_the_spec(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str], emulate: bool
) -> None:
    data = books_spec(CRAWL, site.base_url, pages=0, urls=["/catalogue/page-1.html"], max_depth=0)
    data["seeds"]["file"] = "books-seeds.txt"
    data["follow"]["allowed_domains"] = ["127.0.0.1"]
    spec = tmp_path / "crawls" / f"{CRAWL}.yaml"
    spec.parent.mkdir()
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    listing = "\n".join(f"{site.base_url}/catalogue/page-{n}.html" for n in range(2, PAGES + 1))
    (spec.parent / "books-seeds.txt").write_text(listing + "\n", encoding="utf-8")
    code, out = sluice_run(spec, tmp_path / "state", capsys, *(["--emulate-aws"] if emulate else []))
    assert code == 0
    assert out["pages"]["fetched"] == PAGES
    assert out["records"]["total"] == BOOKS

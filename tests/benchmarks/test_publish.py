"""bench.publish: the README's benchmark section and docs/benchmarks.md written from a result file.

The result files here are built in the shape `bench.run` writes (a row per client and cell, its rounds
under ``rounds``) and in the shape of the files written before rounds (Sluice's runs under ``repeats``,
``config.sluice_repeats``), with figures taken from such a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import publish, report, rounds, run
from bench.publish import END, START

Result = dict[str, Any]
README = f"# Sluice\n\nIntro.\n\n## Performance\n\nHand-written words.\n\n{START}\nold table\n{END}\n\nAfter.\n"
LATENCY = 50.0


def _derived(client: str, n: int, cpu_ms: float, pps: float, turn: int = 0) -> run.Run:
    pages = 1000
    raw = {
        "client": client,
        "concurrency": n,
        "variant": "default" if client == "sluice" else "",
        "pages_requested": pages,
        "pages_ok": pages,
        "records": 20 * pages,
        "wall_s": pages / pps,
        "cpu_s": cpu_ms * pages / 1000,
        "peak_rss_mb": 80.0,
        "rss_before_mb": 78.0,
    }
    return report.derive(raw, LATENCY) | {"round": turn // 2, "turn": turn}


def _row(client: str, n: int, cpus: list[float], pps: float = 500.0) -> run.Run:
    return rounds.combine([_derived(client, n, cpu, pps, i) for i, cpu in enumerate(cpus)])


def _result(matrix: list[run.Run], **config: Any) -> Result:
    return {
        "started": "2026-12-03T07:00:00",
        "argv": [],
        "machine": {
            "cpu_model": "AMD EPYC",
            "cores": 2,
            "memory_gb": 23.5,
            "os": "Linux",
            "implementation": "CPython",
            "python": "3.11.7",
            "packages": {"aiohttp": "3.14.5"},
            "commit": "abc1234",
        },
        "config": {"pages": 1000, "latency_ms": LATENCY, "rounds": {"matrix": 5, "heavy": 5, "docs": 2}, **config},
        "matrix": matrix,
        "heavy": [],
        "docs": [],
        "transports": [],
        "pipeline": [],
    }


def _old_result() -> Result:
    """A file from before rounds, as bench-20261202-164853.json has it: Sluice's three runs under
    ``repeats`` (no share of the limit kept), the peer's one run, ``config.sluice_repeats``."""
    sluice = _derived("sluice", 8, 2.1143476385, 148.3636886841243)
    sluice["repeats"] = [
        {"pages_per_s": 148.5177422947798, "cpu_ms_per_page": 2.017888729, "peak_rss_mb": 79.3671875},
        {"pages_per_s": 148.3636886841243, "cpu_ms_per_page": 2.1143476385, "peak_rss_mb": 79.375},
        {"pages_per_s": 147.9410589278655, "cpu_ms_per_page": 2.2595137135, "peak_rss_mb": 79.30859375},
    ]
    sluice["cpu_ms_per_page_spread"] = [2.017888729, 2.2595137135]
    sluice["cpu_ms_per_page_median"] = 2.1143476385
    peer = _derived("peer", 8, 1.84, 149.6)
    result = _result([sluice, peer], sluice_repeats=3)
    del result["config"]["rounds"]
    return result


def _write(tmp_path: Path, result: Result, docs: str = "") -> tuple[Path, Path]:
    readme, page = tmp_path / "README.md", tmp_path / "benchmarks.md"
    readme.write_text(README)
    if docs:
        page.write_text(docs)
    publish.publish(result, "bench/results/bench-20261203-070000.json", readme, page)
    return readme, page


def test_only_what_lies_between_the_markers_changes_in_the_readme(tmp_path: Path) -> None:
    result = _result([_row("sluice", 32, [1.0, 1.1, 1.2]), _row("peer", 32, [1.5, 1.6, 1.7])])

    readme, _ = _write(tmp_path, result)

    text = readme.read_text()
    before, after = README.split(START)[0], README.split(END)[1]
    assert text.startswith(before + START + "\n")
    assert text.endswith(END + after)
    inside = text[len(before) + len(START) : -len(END + after)]
    assert "old table" not in inside
    assert "| 50 KB listings | 32 | 1.10 (1.00–1.20) | 1.60 (1.50–1.70) |" in inside
    assert "bench/results/bench-20261203-070000.json" in inside


def test_a_readme_without_markers_is_refused_clearly_and_nothing_is_written(tmp_path: Path) -> None:
    readme, page = tmp_path / "README.md", tmp_path / "benchmarks.md"
    readme.write_text("# Sluice\n\n## Performance\n\nA table by hand.\n")
    page.write_text("# Benchmarks\n\nkept as it is\n")
    result = _result([_row("sluice", 32, [1.0]), _row("peer", 32, [1.5])])

    with pytest.raises(publish.MarkersMissing, match=r"<!-- bench:start -->.*<!-- bench:end -->"):
        publish.publish(result, "r.json", readme, page)

    assert readme.read_text() == "# Sluice\n\n## Performance\n\nA table by hand.\n"
    assert page.read_text() == "# Benchmarks\n\nkept as it is\n"
    with pytest.raises(publish.MarkersMissing):
        publish.replace_section(f"{END}\nx\n{START}\n", "body")


def test_an_older_file_with_repeats_is_read_as_median_min_max(tmp_path: Path) -> None:
    readme, page = _write(tmp_path, _old_result())

    docs = page.read_text()
    assert "| sluice | default | 8 | 3 | 1,000 |" in docs  # three repeats read as its rounds
    assert "2.11 (2.02–2.26)" in docs
    assert "0.93 (0.92–0.93)" in docs  # its share of the limit worked out from pages/s and CPU
    assert "a file from before rounds" in docs
    assert "1.15, behind" in readme.read_text()


def test_sluice_against_the_peer_is_judged_by_the_medians_of_its_rounds(tmp_path: Path) -> None:
    sluice = _row("sluice", 32, [1.0, 1.1, 1.2])
    peer = _row("peer", 32, [1.5, 1.6, 1.7])
    sluice["cpu_ms_per_page"] = 9.0  # the row's own figure is not what it is judged by
    result = _result([sluice, peer])

    readme, page = _write(tmp_path, result)

    ratio = f"{1.1 / 1.6:.2f}"
    assert f"| {ratio}, ahead |" in readme.read_text()
    assert f"On 50 KB listings Sluice's median CPU a page is {ratio}× the best peer's (lower at 32 in flight)." in (
        readme.read_text()
    )
    checks = {c["target"]: c for c in report.targets(result)}
    assert checks["sluice CPU-ms a page ÷ the best peer's, 50 KB listings (medians, worst concurrency)"]["verdict"] == (
        "PASS"
    )
    assert "sluice CPU-ms per 50 KB page (worst concurrency) | ≤ 1.2 ms | 1.10 ms" in page.read_text()


def test_the_share_of_the_limit_is_held_against_aiohttp_and_selectolax_not_a_cpu_bound_peer(tmp_path: Path) -> None:
    # Scrapy spends 5 ms a page, so its limit is its own 200 pages/s and 198 pages/s is 0.99 of it;
    # Sluice and aiohttp + selectolax are bound by 32 in flight over 50 ms (640 pages/s).
    sluice = _row("sluice", 32, [1.1, 1.1, 1.1], pps=580.0)
    peer = _row("peer", 32, [1.5, 1.5, 1.5], pps=560.0)
    scrapy = _row("scrapy", 32, [5.0], pps=198.0)
    result = _result([sluice, peer, scrapy])

    rows = report.comparison(result)
    checks = {c["target"]: c for c in report.targets(result)}

    assert rows[0]["share_vs_peer"] == pytest.approx(580 / 560)
    assert rows[0]["share_verdict"] == "ahead"
    share = checks["sluice share of the limit ÷ aiohttp + selectolax's, 50 KB listings (medians, worst concurrency)"]
    assert share["verdict"] == "PASS"
    assert share["value"] == pytest.approx(580 / 560)
    cpu = checks["sluice CPU-ms a page ÷ the best peer's, 50 KB listings (medians, worst concurrency)"]
    assert cpu["value"] == pytest.approx(1.1 / 1.5)
    readme, page = _write(tmp_path, result)
    assert f"| {580 / 560:.2f}, ahead |" in page.read_text()
    assert f"| 0.91 | 0.88 | {580 / 560:.2f}, ahead |" in readme.read_text()


def test_overlapping_ranges_are_within_the_spread_not_a_miss(tmp_path: Path) -> None:
    sluice = _row("sluice", 128, [1.30, 1.37, 1.45])  # median above the peer's, range reaching it
    peer = _row("peer", 128, [1.33, 1.34, 1.40])
    result = _result([sluice, peer])

    readme, page = _write(tmp_path, result)

    assert "| 1.02, within the spread |" in readme.read_text()
    checks = {c["target"]: c for c in report.targets(result)}
    cpu = checks["sluice CPU-ms a page ÷ the best peer's, 50 KB listings (medians, worst concurrency)"]
    assert cpu["value"] == pytest.approx(1.37 / 1.34)
    assert cpu["verdict"] == "within the spread"
    assert "**within the spread**" in page.read_text()


def test_regenerating_benchmarks_md_keeps_the_sections_it_does_not_write(tmp_path: Path) -> None:
    appended = (
        "## Many hosts: fleet-wide per-host caps\n\n`python -m bench.many_hosts`: a table.\n\n"
        "## Notes by hand (2026-12-01)\n\nWords nobody generates.\n"
    )
    old = (
        "# Benchmarks\n\nold intro\n\n## Results (2,000 pages, 50 ms latency)\n\nold rows\n\n"
        "## Heavy pages (~400 KB, 500 pages)\n\nold heavy rows\n\n## Targets\n\nold verdicts\n\n" + appended
    )
    result = _result([_row("sluice", 32, [1.0, 1.1, 1.2]), _row("peer", 32, [1.5, 1.6, 1.7])])

    _, page = _write(tmp_path, result, docs=old)

    text = page.read_text()
    assert text.endswith("\n\n" + appended)
    assert text.startswith(report.markdown(result).rstrip("\n"))
    for stale in ("old intro", "old rows", "old heavy rows", "old verdicts", "2,000 pages"):
        assert stale not in text
    assert text.count("## Results (") == 1


def test_a_cell_runs_sluice_and_the_peer_in_alternating_rounds_and_the_others_once() -> None:
    started: list[str] = []

    class Recorded(run.Harness):
        def run(self, client: str, server: object, pages: int, concurrency: int, variant: str = "") -> run.Run:
            started.append(client)
            return _derived(client, concurrency, 1.0 + len(started) / 100, 500.0)

    harness = Recorded(LATENCY, deadline=0.0, quiet_wait_left_s=0.0)
    rows = harness.cell(["sluice", "peer", "scrapy"], 4, server=None, pages=1000, n=32)  # type: ignore[arg-type]

    assert started == ["sluice", "peer", "peer", "sluice", "sluice", "peer", "peer", "sluice", "scrapy"]
    assert [r["client"] for r in rows] == ["sluice", "peer", "scrapy"]
    assert [x["turn"] for x in rows[0]["rounds"]] == [0, 3, 4, 7]
    assert [x["round"] for x in rows[1]["rounds"]] == [0, 1, 2, 3]
    assert len(rows[2]["rounds"]) == 1


def test_the_report_reads_the_newest_whole_run_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    old = _result([_row("sluice", 32, [1.0]), _row("peer", 32, [1.5])])
    new = _result([_row("sluice", 32, [1.2]), _row("peer", 32, [1.4])])
    (results / "bench-20261201-080000.json").write_text(json.dumps(old))
    (results / "bench-20261202-080000.json").write_text(json.dumps(new))
    (results / "bench-20261203-080000-quick.json").write_text(json.dumps(old))
    (results / "bench-20261203-090000-partial.json").write_text(json.dumps(old))
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(README)
    monkeypatch.chdir(tmp_path)

    report.main([])

    text = (tmp_path / "README.md").read_text()
    assert "bench/results/bench-20261202-080000.json" in text
    assert "| 50 KB listings | 32 | 1.20 | 1.40 |" in text
    assert (tmp_path / "docs" / "benchmarks.md").read_text().startswith("# Benchmarks")


def test_the_pipeline_and_the_engine_run_in_alternating_rounds_and_are_judged_by_their_medians() -> None:
    started: list[tuple[str, str]] = []
    pps = {"sluice": [600.0, 300.0, 610.0], "pipeline": [500.0, 490.0, 200.0]}  # one slow outlier each

    class Recorded(run.Harness):
        def run(self, client: str, server: object, pages: int, concurrency: int, variant: str = "") -> run.Run:
            started.append((client, variant))
            figures = pps.get(client, [100.0])
            nth = sum(1 for c, _ in started if c == client) - 1
            return _derived(client, concurrency, 1.5, figures[nth % len(figures)]) | {"variant": variant}

    harness = Recorded(LATENCY, deadline=0.0, quiet_wait_left_s=0.0)
    rows = run.pipeline_cell(harness, None, 1000, run.PIPELINE_CLIENTS, 3)  # type: ignore[arg-type]

    engine, first, night = ("sluice", "default"), ("pipeline", "first"), ("pipeline", "nightly")
    assert started == [engine, first, first, engine, engine, first, night, ("scrapy_stateful", "batched")]
    assert [(r["client"], r["variant"]) for r in rows] == list(run.PIPELINE_CLIENTS)
    assert [len(r["rounds"]) for r in rows] == [3, 3, 1, 1]
    checks = report.pipeline_targets([r | {"size": 1000} for r in rows])
    ratio = next(c for c in checks if c["target"] == "sluice run ÷ sluice crawl pages/s, 1,000 listing pages")
    assert ratio["value"] == pytest.approx(490 / 600)  # medians, not one run against another
    assert ratio["verdict"] == "within the spread"  # 200 ÷ 610 to 500 ÷ 300 reaches 0.8 both ways
    assert ratio["detail"] == f"{200 / 610:.2f}–{500 / 300:.2f} over the rounds"

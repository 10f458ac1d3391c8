"""What the scale model reads: AWS's quotas (one file, each with its source), the measured figures, the grid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sluice_tools.meter.fit import NegativeSlopeWarning
from sluice_tools.scale.inputs import InputFileError, Measured, measured, stack_settings
from sluice_tools.scale.quotas import QUOTAS_FILE, REQUIRED, QuotaFileError, load_quotas
from sluice_tools.scale.scenarios import even, scenarios, zipf


def test_every_quota_has_a_value_and_an_aws_source() -> None:
    quotas = load_quotas()
    assert set(quotas.entries) == set(REQUIRED)
    for quota in quotas.entries.values():
        assert quota.url.startswith("https://docs.aws.amazon.com/"), quota.name
    assert quotas["sqs_fifo_in_flight"] == 120_000
    assert quotas["sqs_fifo_head_window"] == 120_000
    assert quotas["lambda_timeout_s"] == 900
    assert quotas["dynamodb_partition_wcu_per_s"] == 1000
    assert quotas["s3_prefix_get_per_s"] == 5500


def test_a_quota_without_its_source_is_refused_by_name(tmp_path: Path) -> None:
    raw = yaml.safe_load(QUOTAS_FILE.read_text(encoding="utf-8"))
    del raw["lambda_timeout_s"]["source"]
    bad = tmp_path / "quotas.yaml"
    bad.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(QuotaFileError, match="'lambda_timeout_s' lacks source"):
        load_quotas(bad)
    raw = yaml.safe_load(QUOTAS_FILE.read_text(encoding="utf-8"))
    raw["s3_prefix_put_per_s"]["value"] = "lots"
    bad.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(QuotaFileError, match="'s3_prefix_put_per_s' has value 'lots'"):
        load_quotas(bad)


def test_scaling_an_unknown_quota_is_an_error() -> None:
    with pytest.raises(KeyError, match="no such quota: sqs_window"):
        load_quotas().scaled(sqs_window=10)


def test_the_stack_settings_are_the_deployed_config() -> None:
    from infra.config import DEFAULT

    stack = stack_settings()
    assert stack.fetcher_max_concurrency == DEFAULT.fetcher_max_concurrency
    assert stack.pack_receives == DEFAULT.pack_receives
    assert stack.finalizer_timeout_s == DEFAULT.finalizer.timeout_s
    assert stack.run_deadline_s == DEFAULT.run_deadline_hours * 3600


def test_a_results_file_without_a_field_is_named(tmp_path: Path) -> None:
    cost = tmp_path / "cost-latest.json"
    bench = tmp_path / "latest.json"
    cost.write_text(json.dumps({"scenarios": [{"label": "demo crawl, first run", "pages": 10}]}), encoding="utf-8")
    bench.write_text(json.dumps({"pipeline": []}), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"cost-latest\.json: no 'calls'"):
        measured(cost, bench)
    with pytest.raises(InputFileError, match="is missing: run `make cost` and `make bench` first"):
        measured(tmp_path / "absent.json", bench)


def test_zipf_sizes_add_up_and_fall_off_as_one_over_rank() -> None:
    sizes = zipf(1_000_000, 100)
    assert sum(sizes) == 1_000_000
    assert list(sizes) == sorted(sizes, reverse=True)
    assert min(sizes) >= 1
    # H(100) = 1 + 1/2 + ... + 1/100 = 5.187: the biggest host holds 1 / 5.187 = 19.3% of the URLs.
    assert sizes[0] == pytest.approx(1_000_000 / 5.187, rel=0.01)
    assert sizes[1] == pytest.approx(sizes[0] / 2, rel=0.01)
    with pytest.raises(ValueError, match="cannot give each of 10 hosts one"):
        zipf(5, 10)


def test_the_grid_plays_every_size_over_every_host_count() -> None:
    assert even(10, 3) == (4, 3, 3)
    grid = scenarios((1_000_000, 10_000_000), (1, 1000))
    assert [(s.urls, s.hosts, s.distribution) for s in grid] == [
        (1_000_000, 1, "even"),
        (1_000_000, 1000, "even"),
        (1_000_000, 1000, "zipf"),
        (10_000_000, 1, "even"),
        (10_000_000, 1000, "even"),
        (10_000_000, 1000, "zipf"),
    ]


def _bench_row(client: str, variant: str, pages: int, peak_rss_mb: float, cpu_s: float = 1.0) -> dict[str, object]:
    return {"client": client, "variant": variant, "pages_ok": pages, "peak_rss_mb": peak_rss_mb, "cpu_s": cpu_s}


def _bench(rows: list[dict[str, object]]) -> dict[str, object]:
    final = {"pages": 100, "ms_per_page": 0.2, "bytes_read_per_page": 1.0, "bytes_written_per_page": 1.0}
    return {"started": "T", "pipeline": rows, "finalizer": {"100": {"first": final | {"rss_rise_mb": 1.0}}}}


def _scenario(pages: int, calls: dict[str, int], wru: float, sqs: int) -> dict[str, object]:
    return {
        "label": "demo crawl, first run",
        "pages": pages,
        "calls": calls,
        "dynamodb": {"wru": wru, "rru": 0.0},
        "sqs_billed_requests": sqs,
        "log_bytes": 0,
    }


def _cost(big: dict[str, object], small: dict[str, object] | None) -> dict[str, object]:
    report: dict[str, object] = {"when": "T", "site_latency_ms": 300, "scenarios": [big]}
    if small is not None:
        report["small_scenarios"] = [small]
    return report


def _write(tmp_path: Path, cost: dict[str, object], bench: dict[str, object]) -> tuple[Path, Path]:
    cost_file, bench_file = tmp_path / "cost-latest.json", tmp_path / "latest.json"
    cost_file.write_text(json.dumps(cost), encoding="utf-8")
    bench_file.write_text(json.dumps(bench), encoding="utf-8")
    _side_files(tmp_path)
    return cost_file, bench_file


def _side_files(tmp_path: Path, handlers: dict[str, float] | None = None) -> None:
    """A synthetic sharded finalize (320,000 pages in 32 shards of 10,000; worst task 190 MB, nightly keys) and
    the handlers' RSS (all under the engine's unless a test says)."""
    phases = [{"phase": "scan", "peak_rss_mb": 150.0}, {"phase": "keys", "peak_rss_mb": 170.0}]
    nightly = [{"phase": "scan", "peak_rss_mb": 160.0}, {"phase": "keys", "peak_rss_mb": 190.0}]
    finalize = {
        "first": {"pages": 320_000, "shards": 32, "phases": phases},
        "nightly": {"pages": 320_000, "shards": 32, "phases": nightly},
        "command": "python -m bench.finalize_scale --synthetic 320000",
        "date": "D",
    }
    (tmp_path / "finalize-synthetic-320000.json").write_text(json.dumps(finalize), encoding="utf-8")
    rss = handlers or {"fetcher": 50.0, "scheduler": 50.0, "finalizer": 50.0}
    handler = {"command": "python -m sluice_tools.scale.handler_memory", "date": "D", "peak_rss_mb": rss}
    (tmp_path / "handler-rss.json").write_text(json.dumps(handler), encoding="utf-8")


def _measured(cost_file: Path, bench_file: Path) -> Measured:
    folder = cost_file.parent
    return measured(
        cost_file,
        bench_file,
        finalize_file=folder / "finalize-synthetic-320000.json",
        handler_file=folder / "handler-rss.json",
    )


def test_a_fetchers_memory_is_the_engines_not_the_local_runs_or_a_peers(tmp_path: Path) -> None:
    # As make bench records them: `sluice run`'s nightly variant peaks highest (the local store, the local
    # finalize and the first run before it, in one process), the peer next; the engine fetches and extracts.
    rows = [
        _bench_row("sluice", "default", 1000, 82.6),
        _bench_row("pipeline", "first", 1000, 182.7),
        _bench_row("sluice", "default", 10000, 84.9),
        _bench_row("pipeline", "first", 10000, 224.1),
        _bench_row("pipeline", "nightly", 10000, 250.0),
        _bench_row("scrapy_stateful", "batched", 10000, 130.9),
    ]
    big = _scenario(2000, {"s3.PutObject": 40}, 2000.0, 60)
    cost_file, bench_file = _write(tmp_path, _cost(big, None), _bench(rows))
    figures = _measured(cost_file, bench_file)
    assert figures.base_rss_mb == {"fetcher": 84.9, "scheduler": 84.9, "finalizer": 84.9}
    assert "engine run" in figures.sources["process memory"]
    assert "10,000 pages" in figures.sources["process memory"]
    cost_file, bench_file = _write(tmp_path, _cost(big, None), _bench(rows[1:2]))
    with pytest.raises(InputFileError, match="no engine run"):
        _measured(cost_file, bench_file)


def test_a_pages_calls_are_the_slope_between_two_sizes_and_s3_counts_by_price_class(tmp_path: Path) -> None:
    # make cost's 2,000- and 500-page demo first runs (2026-12-03): a run's fixed calls (the finalizer's shard
    # objects, the manifest, robots.txt) are 20 PUTs and 21 GETs, a page's 0.010 and 0.0133 (a part a batch, read
    # back once); dividing the big run by its pages made them 0.020 and 0.024.
    big = _scenario(2000, {"s3.PutObject": 40, "s3.GetObject": 48, "sqs.ReceiveMessage": 21}, 2031.0, 63)
    small = _scenario(500, {"s3.PutObject": 25, "s3.GetObject": 28}, 516.0, 18)
    rows = [_bench_row("sluice", "default", 100, 80.0), _bench_row("pipeline", "first", 100, 90.0)]
    cost_file, bench_file = _write(tmp_path, _cost(big, small), _bench(rows))
    figures = _measured(cost_file, bench_file)
    assert figures.s3_puts == pytest.approx(15 / 1500)
    assert figures.s3_gets == pytest.approx(20 / 1500)
    assert figures.write_units == pytest.approx(1515 / 1500)
    assert figures.sqs_requests == pytest.approx(45 / 1500)
    assert "slope from 500 to 2,000 pages" in figures.sources["calls, units and bytes a page"]
    assert (figures.run_s3_puts, figures.run_s3_gets) == pytest.approx((20, 48 - 2000 * 20 / 1500))
    # Multipart uploads and LIST are PUT-class, HEAD GET-class, DELETE free (as make cost prices them).
    calls = {"s3.CreateMultipartUpload": 1, "s3.UploadPart": 3, "s3.CompleteMultipartUpload": 1}
    calls |= {"s3.ListObjectsV2": 1, "s3.HeadObject": 2, "s3.GetObject": 4, "s3.DeleteObject": 5}
    cost_file, bench_file = _write(tmp_path, _cost(_scenario(10, calls, 10.0, 1), None), _bench(rows))
    figures = _measured(cost_file, bench_file)
    assert figures.s3_puts == pytest.approx(6 / 10)
    assert figures.s3_gets == pytest.approx(6 / 10)


def test_a_functions_base_is_the_higher_of_the_engines_peak_and_its_handlers(tmp_path: Path) -> None:
    # The engine bench client peaks at 85 MB; the fetcher and finalizer handlers, imported with their AWS
    # clients, at 93 and 99 MB; the scheduler's 80 MB is under the engine's.
    rows = [_bench_row("sluice", "default", 10000, 85.0), _bench_row("pipeline", "first", 10000, 200.0)]
    cost_file, bench_file = _write(
        tmp_path, _cost(_scenario(2000, {"s3.PutObject": 40}, 2000.0, 60), None), _bench(rows)
    )
    _side_files(tmp_path, {"fetcher": 93.0, "scheduler": 80.0, "finalizer": 99.0})
    figures = _measured(cost_file, bench_file)
    assert figures.base_rss_mb == {"fetcher": 93.0, "scheduler": 85.0, "finalizer": 99.0}
    assert "handler-rss.json" in figures.sources["process memory"]


def test_finalizer_memory_a_page_is_the_worst_shard_tasks_not_the_local_finalizes_rss_rise(tmp_path: Path) -> None:
    # The local bench's finalize rose 1 MB over 100 pages (10 KB a page, and flat whatever the run's size); the
    # synthetic sharded finalize's worst task peaked at 190 MB over 10,000 pages a shard: (190 - 90) / 10,000.
    rows = [_bench_row("sluice", "default", 100, 80.0), _bench_row("pipeline", "first", 100, 90.0)]
    cost_file, bench_file = _write(
        tmp_path, _cost(_scenario(2000, {"s3.PutObject": 40}, 2000.0, 60), None), _bench(rows)
    )
    figures = _measured(cost_file, bench_file)
    assert figures.finalize_mb == pytest.approx(100 / 10_000)
    source = figures.sources["finalizer memory a page"]
    assert "finalize-synthetic-320000.json" in source
    assert "190 MB (keys) at 10,000 pages a shard" in source


def test_the_largest_synthetic_finalize_is_read_by_default() -> None:
    figures = measured()
    assert "finalize-synthetic-1000000.json" in figures.sources["finalizer memory a page"]
    assert figures.finalize_mb > 0.001  # several KB a page of its shard, not the flat local rise's 0.2 KB


def test_a_figure_that_falls_from_the_smaller_run_to_the_larger_is_refused(tmp_path: Path) -> None:
    big = _scenario(2000, {"s3.PutObject": 40}, 2000.0, 60)
    small = _scenario(500, {"s3.PutObject": 50}, 500.0, 15)
    rows = [_bench_row("sluice", "default", 100, 80.0), _bench_row("pipeline", "first", 100, 90.0)]
    cost_file, bench_file = _write(tmp_path, _cost(big, small), _bench(rows))
    with pytest.warns(NegativeSlopeWarning), pytest.raises(InputFileError, match="negative slope"):
        _measured(cost_file, bench_file)

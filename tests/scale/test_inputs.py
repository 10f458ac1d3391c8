"""What the scale model reads: AWS's quotas (one file, each with its source), the measured figures, the grid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sluice_tools.scale.inputs import InputFileError, measured, stack_settings
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

"""One defaults source: the stack's numbers, an unset variable and a bare ``Tuning`` all mean the same run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from infra.config import DEFAULT, StackConfig

from sluice import defaults
from sluice.pipeline.services import Tuning
from sluice.settings import Settings
from sluice_tools.runner.local import LocalFleet

WHERE = {
    "ledger_table": "sluice-dev-ledger",
    "bucket": "sluice-dev-records",
    "queue_url": "https://sqs.example/frontier.fifo",
    "specs_dir": Path("specs"),
}


def test_a_function_with_no_tuning_variable_set_runs_by_the_bare_tuning() -> None:
    assert Settings.model_validate(WHERE).tuning() == Tuning()


def test_the_stack_deploys_the_functions_own_defaults() -> None:
    deployed = Settings.model_validate({**WHERE, **DEFAULT.function_settings()})
    assert deployed.tuning() == Tuning()
    for name, value in DEFAULT.function_settings().items():
        if name not in ("finalizer_function", "scheduler_function", "workgroup", "glue_database"):  # the stage's names
            assert Settings.model_fields[name].default == value, name


def test_the_defaults_are_the_documented_numbers() -> None:
    # Written out: a changed default is a decision (docs/costs.md and the scale model price these).
    tuning = Tuning()
    assert (tuning.max_receive_count, tuning.urls_per_message, tuning.batch_size, tuning.pack_receives) == (
        5,
        10,
        10,
        8,
    )
    assert (tuning.host_backlog_messages, tuning.run_deadline_hours, tuning.catalog_max_age_days) == (20, 12, 14)
    assert (tuning.visibility_base_s, tuning.visibility_max_s, tuning.early_write_urls) == (10.0, 900.0, 0)
    assert (tuning.fetcher_memory_mb, tuning.finalizer_memory_mb) == (512, 2048)
    assert (tuning.finalize_shard_pages, tuning.finalize_max_shards, tuning.finalize_attempts) == (50_000, 4096, 3)
    assert StackConfig().claim_ttl_days == 15


def test_a_catalog_is_used_until_a_day_before_its_entries_expire() -> None:
    stack = StackConfig(claim_ttl_days=30)
    tuning = Settings.model_validate({**WHERE, **stack.function_settings()}).tuning()
    assert tuning.catalog_max_age_days == defaults.catalog_max_age_days(30) == 29


def test_the_local_runner_runs_by_the_stacks_numbers_but_for_short_backoff_small_reads_early_writes_batches_and_shards(
    tmp_path: Path,
) -> None:
    local = LocalFleet(tmp_path / "specs", tmp_path / "state").tuning
    assert (local.visibility_base_s, local.visibility_max_s, local.early_write_urls) == (1.0, 10.0, 20)
    assert local.host_backlog_messages == 100  # a host's backlog holds a local batch (sluice run --batch-messages)
    assert (local.finalize_shard_pages, local.finalize_workers) == (2500, 2)
    stack_like = replace(
        local,
        visibility_base_s=10.0,
        visibility_max_s=900.0,
        output_span_bytes=8 * 1024 * 1024,
        output_readers=8,
        early_write_urls=0,
        host_backlog_messages=20,
        finalize_shard_pages=50_000,
        finalize_workers=4,
    )
    assert stack_like == Tuning()

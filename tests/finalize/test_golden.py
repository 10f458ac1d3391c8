"""The sharded finalizer writes what the one-process finalizer wrote for the same runs.

``golden.json`` was written by ``python -m tests.finalize.golden`` with the finalizer as it was
before it was sharded (one process, one scan, one set of files): for a first run and a nightly
run of 600 synthetic pages (pages failed, skipped, keys two pages share, pages reused from the
first run's output, pages gone), each run's summary without what differs between two finalizings
(ids, clocks, the finalizer's own seconds and their cost) and the SHA-256 of its output lines,
sorted. Here the same runs are finalized with 1, 32 and 128 shards and compared field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.finalize import golden

from sluice.pipeline.services import Tuning

NEW_FIELDS = {"finalize_shards", "egress.route"}
"""Fields the summary gained after the golden runs were captured: the shard count, and the route a run's
requests took (issue 21; these runs fetch nothing, so it is ``direct``)."""
"""Summary fields the sharded finalizer adds: how many shards finalized the run."""


def _fields(summary: dict[str, Any]) -> dict[str, Any]:
    """Every summary field by its path, as ``records.gone`` (so a difference names the field)."""
    flat: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, dict) and value and key not in ("failures", "skips", "rejected", "null_rates"):
            flat |= {f"{key}.{k}": v for k, v in _fields(value).items()}
        else:
            flat[key] = value
    return flat


@pytest.mark.parametrize(("shard_pages", "shards"), [(50_000, 1), (37, 32), (5, 128)])
def test_the_sharded_finalizer_writes_what_the_one_process_finalizer_wrote(
    tmp_path: Path, shard_pages: int, shards: int
) -> None:
    expected = json.loads(golden.GOLDEN.read_text(encoding="utf-8"))
    got = golden.capture(tmp_path, Tuning(finalize_shard_pages=shard_pages))

    for run in ("first", "nightly"):
        assert got[run]["summary"]["finalize_shards"] == shards
        assert got[run]["summary"]["egress"] == {"route": "direct"}
        mine = {k: v for k, v in _fields(got[run]["summary"]).items() if k not in NEW_FIELDS}
        theirs = _fields(expected[run]["summary"])
        # Each shard writes its own files: the output's PUTs grow with them (1 per file under 16 MB).
        files = got[run]["lines"].pop("files")
        assert mine.pop("cost_usage.s3_puts") - theirs.pop("cost_usage.s3_puts") == files - expected[run]["lines"].pop(
            "files", 1
        )
        assert shards == 1 or files > 1
        assert sorted(mine) == sorted(theirs), f"{run}: fields differ"
        assert {k: v for k, v in mine.items() if theirs[k] != v} == {}, f"{run}: values differ"
        assert got[run]["lines"] == expected[run]["lines"], f"{run}: output lines differ"


def test_the_golden_runs_hold_what_the_comparison_needs() -> None:
    """The captured runs exercise every rule a shard could get wrong: without this, equality proves little."""
    expected = json.loads(golden.GOLDEN.read_text(encoding="utf-8"))
    first, nightly = expected["first"]["summary"], expected["nightly"]["summary"]
    assert first["records"]["duplicates_dropped"] > 0  # keys two pages share (most in two shards)
    assert first["pages"]["failed"] > 0
    assert first["pages"]["skipped"] > 0
    assert nightly["pages"]["not_modified"] > 0  # reused from the first run's output
    assert nightly["records"]["gone"] > 0  # records of the first run's output this run lacks
    assert nightly["records"]["reused_missing"] > 0  # partial blocks are not reused

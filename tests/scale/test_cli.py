"""`make scale ARGS=--json`: one JSON object a scenario, with the fields the issue names."""

from __future__ import annotations

import json

import pytest

from sluice_tools.scale.__main__ import main

REQUIRED = {"urls", "hosts", "distribution", "wall_s", "bound_s", "usd", "peak_concurrency", "limits_crossed"}


def test_json_prints_one_object_a_scenario_with_the_required_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--sizes", "20000", "--hosts", "1", "10", "--no-before"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # One host is played once (even and Zipf are the same night); 10 hosts even and Zipf.
    assert [(r["hosts"], r["distribution"]) for r in rows] == [(1, "even"), (10, "even"), (10, "zipf")]
    for row in rows:
        assert set(row) >= REQUIRED
        assert row["urls"] == 20_000
        assert row["wall_s"] >= row["bound_s"] > 0
        assert row["limits_crossed"] == []
        assert row["peak_concurrency"]["fetcher"] >= 1
        assert row["usd"] > 0
    assert rows[2]["zipf_exponent"] == 1.0


def test_bad_sizes_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--json", "--sizes", "5", "--hosts", "10"])
    assert "--hosts must not exceed --sizes" in capsys.readouterr().err

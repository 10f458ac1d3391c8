"""A finished local run's records also as Parquet: beside the JSON Lines, typed as the Glue table, read by
`sluice query`, rewritten by a re-extraction, and a failure said, never hidden."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from sluice_tools.runner import parquet
from sluice_tools.runner.demo import run_demo

from .conftest import ROOT, LocalCrawls


def _runs_count(run_id: str, where: str = "") -> str:
    return f"SELECT count(*) FROM demo_books WHERE run = '{run_id}'{where}"  # noqa: S608 - the test's own run id


def _count(local: LocalCrawls, sql: str) -> int:
    code, out, err = local.sluice(
        "query", sql, "--state", str(local.state), "--specs", str(local.specs), "--format", "json"
    )
    assert code == 0, err
    rows = json.loads(out)
    return int(next(iter(rows[0].values())))


def test_a_local_run_writes_parquet_beside_its_json_lines_and_query_counts_equal_the_summary(
    local: LocalCrawls,
) -> None:
    local.shrink(2)
    result = local.run()
    run_id = result["run_id"]
    (parquet_folder,) = local.said["parquet"]
    folder = Path(parquet_folder)
    total = result["records"]["total"]
    assert total > 0
    assert folder.parent == Path(result["outputs"]["records"]).parent
    assert json.loads((folder / "done.json").read_text()) == {
        "rows": total,
        "bytes": (folder / "records.parquet").stat().st_size,
        "files": 1,
        "compression": "zstd",
    }
    describe = "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)"
    described = duckdb.execute(describe, [str(folder / "records.parquet")]).fetchall()
    types = {row[0]: row[1] for row in described}
    assert types == {
        "_key": "VARCHAR",
        "_page": "VARCHAR",
        "title": "VARCHAR",
        "url": "VARCHAR",
        "price": "DOUBLE",
        "rating": "VARCHAR",
        "availability": "VARCHAR",
    }
    sql = _runs_count(run_id)
    assert _count(local, sql) == total
    for part in Path(result["outputs"]["records"]).glob("part-*.jsonl"):
        part.unlink()  # the view now has the Parquet copy alone to read
    assert _count(local, sql) == total
    assert _count(local, _runs_count(run_id, " AND price > 0")) == total


def test_a_parquet_write_that_fails_is_said_and_the_json_lines_stay_the_output(
    local: LocalCrawls, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet, "COMPRESSION", "no_such_codec")
    local.shrink(1)
    result = local.run()
    assert "parquet" not in local.said
    (note,) = local.said["note"]
    assert note.startswith("Parquet not written (")
    assert note.endswith("): the JSON Lines records are the run's output")
    assert result["verdict"]["healthy"] is True
    sql = _runs_count(result["run_id"])
    assert _count(local, sql) == result["records"]["total"] > 0
    code, text, _ = local.sluice(
        "run", str(local.specs / "demo-books.yaml"), "--state", str(local.state), "--allow-loopback"
    )
    assert code == 0
    assert "  note     Parquet not written (" in text


def test_a_re_extracted_run_has_its_parquet_written_again(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    assert run_demo(ROOT / "crawls" / "demo-books.yaml", state, say=lambda _: None) == 0
    night3 = sorted((state / "objects" / "runs" / "crawl=demo-books").glob("run=*"))
    done = [
        json.loads(p.read_text()) for p in sorted(state.glob("objects/runs/crawl=demo-books/run=*/parquet/done.json"))
    ]
    assert len(night3) == 3
    # Night 3 wrote no record and so no Parquet; its re-extraction wrote both.
    assert [d["rows"] for d in done] == [1000, 1000, 1000]


def test_the_parquet_rows_are_counted_by_the_copy_not_by_reading_the_file_back(
    local: LocalCrawls, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    connect = duckdb.connect

    class Recording:
        def __init__(self, db: duckdb.DuckDBPyConnection) -> None:
            self.db = db

        def execute(self, sql: str, *args: object) -> duckdb.DuckDBPyConnection:
            statements.append(sql)
            return self.db.execute(sql, *args)

        def close(self) -> None:
            self.db.close()

    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: Recording(connect(*a, **k)))
    local.shrink(2)
    result = local.run()
    (folder,) = local.said["parquet"]
    assert json.loads((Path(folder) / "done.json").read_text())["rows"] == result["records"]["total"] > 0
    assert any(s.startswith("COPY") for s in statements)
    assert not [s for s in statements if "read_parquet" in s]

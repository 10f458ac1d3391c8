"""The Parquet copy's core without AWS: the statements, the idempotency token, and how a copy's record moves."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from sluice.domain.runs import RunState
from sluice.pipeline.finalize.columnar import (
    QueryRefused,
    check_copy,
    check_recent,
    request_token,
    start_copy,
    unload_sql,
    unloads,
)
from sluice.pipeline.finalize.columnar_state import CopyState, describe, read_state
from sluice.spec import parse_spec
from sluice.spec.columns import Column

RUN = "20261201T031700Z-3fa2c1"
NOW = datetime(2026, 12, 1, 4, 30, tzinfo=UTC)
TYPED = parse_spec(
    {
        "name": "typed-books",
        "seeds": {"urls": ["https://example.com/"]},
        "types": {
            "listing": {
                "pages": "/list",
                "extract": {
                    "item": "li",
                    "fields": {"title": "a::text", "price": {"selector": "b::text", "process": ["price"]}},
                },
                "follow": {"books": {"selectors": ["li a"], "carry": ["price"]}},
            },
            "book": {"via": ["books"], "extract": {"fields": {"name": "h1::text"}}},
        },
    }
)


class Objects:
    def __init__(self) -> None:
        self.stored: dict[str, bytes] = {}

    def put(self, key: str, body: bytes, content_type: str) -> None:
        self.stored[key] = body

    def get(self, key: str) -> bytes | None:
        return self.stored.get(key)


class Athena:
    """Records what it is asked; answers each query's state from ``states`` (SUCCEEDED when not set)."""

    def __init__(self, refuse: bool = False) -> None:
        self.started: list[tuple[str, str]] = []
        self.states: dict[str, tuple[str, str | None]] = {}
        self.refuse = refuse

    def start(self, sql: str, token: str) -> str:
        if self.refuse:
            raise QueryRefused("StartQueryExecution in workgroup w: AccessDeniedException: not authorized")
        self.started.append((sql, token))
        return f"q{len(self.started)}"

    def state(self, query_id: str) -> tuple[str, str | None]:
        return self.states.get(query_id, ("SUCCEEDED", None))


class Ledger:
    def __init__(self, *runs: RunState) -> None:
        self.runs = list(runs)

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        return [r for r in self.runs if r.crawl == crawl][:limit]


def test_the_statement_selects_the_tables_columns_of_one_run_into_the_folder() -> None:
    sql = unload_sql("demo_books", [Column("_key", "string"), Column("price", "double")], RUN, "s3://b/p/")
    assert sql == (
        'UNLOAD (SELECT "_key", "price" FROM "demo_books" WHERE run = \'20261201T031700Z-3fa2c1\') '
        "TO 's3://b/p/' WITH (format = 'PARQUET', compression = 'ZSTD')"
    )


def test_a_run_id_that_could_break_the_statement_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a run id"):
        unload_sql("t", [Column("_key", "string")], "x' OR '1'='1", "s3://b/p/")


def test_a_typed_spec_copies_each_type_from_its_own_table_into_its_own_folder() -> None:
    copies = unloads(TYPED, "bkt", RUN)
    assert [(c.kind, c.table, c.location) for c in copies] == [
        ("listing", "typed_books__listing", f"s3://bkt/runs/crawl=typed-books/run={RUN}/parquet/type=listing/"),
        ("book", "typed_books__book", f"s3://bkt/runs/crawl=typed-books/run={RUN}/parquet/type=book/"),
    ]
    assert copies[1].sql.startswith('UNLOAD (SELECT "_key", "_page", "_type", "name", "price" FROM "typed_books__book"')


def test_the_token_is_the_same_for_a_redelivery_and_another_for_a_new_generation() -> None:
    token = request_token("c", RUN, None, "finalized")
    assert 32 <= len(token) <= 128
    assert token == request_token("c", RUN, None, "finalized")
    assert token != request_token("c", RUN, None, "reextract-1")
    assert token != request_token("c", RUN, "book", "finalized")


def test_a_copy_is_started_once_per_generation() -> None:
    athena, objects = Athena(), Objects()
    first = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    again = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    assert len(athena.started) == 2  # one UNLOAD a type, once
    assert first.started_at == "2026-12-01T04:30:00+00:00"  # the time the clock gave, not the wall's
    assert (first.status, again.tables[1].query_id) == ("RUNNING", "q2")
    start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW, generation="reextract-1")
    assert len(athena.started) == 4


def test_a_refused_start_is_recorded_and_started_again_by_the_sweep() -> None:
    objects = Objects()
    refused = start_copy(Athena(refuse=True), objects, TYPED, "bkt", RUN, now=NOW)
    assert refused.status == "NOT_STARTED"
    assert refused.reason is not None
    assert refused.reason.startswith("Athena refused the UNLOAD of typed_books__listing: StartQueryExecution")
    assert describe(refused, "s3://x/").startswith("NOT WRITTEN: Athena refused")
    finished = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
    run = RunState("typed-books", RUN, "finished", "", "", "d", finished_at=finished.isoformat(), records=5)
    athena = Athena()
    (state,) = check_recent(athena, objects, Ledger(run), [TYPED], "bkt", now=finished + timedelta(minutes=1))
    assert (state.status, len(athena.started)) == ("RUNNING", 2)


def test_a_failed_query_fails_the_copy_with_its_reason_and_a_settled_copy_is_not_asked_again() -> None:
    athena, objects = Athena(), Objects()
    state = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    athena.states["q1"] = ("RUNNING", None)
    assert check_copy(athena, objects, state, now=NOW).status == "RUNNING"
    athena.states["q1"] = ("FAILED", "HIVE_BAD_DATA: field price")
    failed = check_copy(athena, objects, state, now=NOW)
    assert failed.status == "FAILED"
    assert failed.reason == "the UNLOAD of typed_books__listing ended FAILED: HIVE_BAD_DATA: field price"
    stored = read_state(objects, "typed-books", RUN)
    assert stored is not None
    assert stored.status == "FAILED"
    athena.states["q1"] = ("SUCCEEDED", None)
    assert check_copy(athena, objects, stored, now=NOW).status == "FAILED"


def test_the_sweep_skips_runs_without_records_old_runs_and_runs_just_finished() -> None:
    finished = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)

    def run(run_id: str, records: int, status: str = "finished") -> RunState:
        return RunState("typed-books", run_id, status, "", "", "d", finished_at=finished.isoformat(), records=records)  # type: ignore[arg-type]

    ledger = Ledger(run("20261201T000000Z-000001", 0), run("20261201T000000Z-000002", 5, "running"))
    athena, objects = Athena(), Objects()
    assert check_recent(athena, objects, ledger, [TYPED], "bkt", now=finished + timedelta(hours=1)) == []
    ledger = Ledger(run("20261201T000000Z-000003", 5))
    assert check_recent(athena, objects, ledger, [TYPED], "bkt", now=finished + timedelta(minutes=5)) == []
    assert check_recent(athena, objects, ledger, [TYPED], "bkt", now=finished + timedelta(days=3)) == []
    (missing,) = check_recent(athena, objects, ledger, [TYPED], "bkt", now=finished + timedelta(minutes=11))
    assert isinstance(missing, CopyState)
    assert missing.status == "RUNNING"
    assert athena.started


def test_a_start_refused_part_way_keeps_the_started_query_and_starts_only_the_rest() -> None:
    class Flaky(Athena):
        throttled = True

        def start(self, sql: str, token: str) -> str:
            if "typed_books__book" in sql and self.throttled:
                raise QueryRefused("StartQueryExecution in workgroup w: ThrottlingException: rate exceeded")
            return super().start(sql, token)

    athena, objects = Flaky(), Objects()
    partial = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    assert partial.status == "NOT_STARTED"
    assert [t.query_id for t in partial.tables] == ["q1", None]
    athena.throttled = False
    again = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    assert again.status == "RUNNING"
    assert [t.query_id for t in again.tables] == ["q1", "q2"]
    assert len(athena.started) == 2


def _parquet_failed(out: str) -> list[tuple[str, float]]:
    """The ParquetFailed data points in what the metrics printed (EMF, one JSON document a line)."""
    points = []
    for line in out.splitlines():
        doc = json.loads(line) if line.startswith("{") else {}
        if "ParquetFailed" in doc:
            value = doc["ParquetFailed"]  # Powertools prints a list of values
            points.append((doc["crawl"], value[0] if isinstance(value, list) else value))
    return points


def test_a_failed_or_refused_copy_counts_parquet_failed_for_its_crawl_and_a_running_one_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    athena, objects = Athena(), Objects()
    state = start_copy(athena, objects, TYPED, "bkt", RUN, now=NOW)
    athena.states["q1"] = ("RUNNING", None)
    check_copy(athena, objects, state, now=NOW)
    assert _parquet_failed(capsys.readouterr().out) == []
    athena.states["q1"] = ("FAILED", "HIVE_BAD_DATA: field price")
    check_copy(athena, objects, state, now=NOW)
    assert _parquet_failed(capsys.readouterr().out) == [("typed-books", 1.0)]
    start_copy(Athena(refuse=True), Objects(), TYPED, "bkt", RUN, now=NOW)
    assert _parquet_failed(capsys.readouterr().out) == [("typed-books", 1.0)]

"""A finalized run's records copied as Parquet on AWS: an Athena ``UNLOAD`` per table, started, never waited for.

The finalizer starts it once the verdict is written (:func:`start_copy`); Athena writes the files into
``runs/crawl=NAME/run=ID/parquet/`` (a spec with types: one ``UNLOAD`` per ``parquet/type=TYPE/``), typed
as the JSON table, read by the crawl's ``_parquet`` tables (``infra/catalog.py``). What was started and
how it ended is the run's ``parquet.json`` beside its summary (:mod:`~sluice.pipeline.finalize.columnar_state`);
the sweep reads the query states back (:func:`check_recent`) and records a failed or never-started copy
there, logged as an alert, so a missing Parquet copy is said, never hidden. The JSON Lines stay the run's
output either way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from sluice.domain.layout import parquet_prefix
from sluice.domain.runs import RunState
from sluice.metrics import CRAWL_DIMENSION, UNITS, RunMetric
from sluice.observability import logger, metrics
from sluice.pipeline.finalize.columnar_state import CopiedTable, CopyState, CopyStore, copy_state_key, read_state
from sluice.spec import CrawlSpec, spec_files
from sluice.spec.columns import Column, record_columns, table_name, type_columns, type_table_name

if TYPE_CHECKING:
    from sluice.pipeline.finalize.driver import Finalized
    from sluice.pipeline.services import Services

FINISHED_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")
"""Athena's final query states; QUEUED and RUNNING are still on their way."""
MISSING_AFTER = timedelta(minutes=10)
"""A finished run with no copy recorded this long after it finished lost its start: the sweep starts it."""
CHECK_WINDOW = timedelta(days=2)
"""The sweep looks at runs finished this recently (older ones were settled, or predate the copy)."""
RECENT_RUNS = 3
"""Runs per crawl the sweep reads from the ledger (newest first)."""
FINALIZED = "finalized"
"""The generation of the copy the finalizer starts; ``sluice reextract`` starts another, named its own."""
_SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class QueryRefused(RuntimeError):
    """Athena did not take or answer the call (denied, throttled, unknown workgroup); the text says which."""


class QueryEngine(Protocol):
    """Athena as the copy uses it: start a statement in the copy's workgroup (its scan cut-off sized to a whole run,
    ``parquet_scan_limit_gb``; not the users' query workgroup), read a query's state."""

    def start(self, sql: str, token: str) -> str:
        """Start ``sql``; the same ``token`` again returns the same query (Athena's idempotency token)."""
        ...

    def state(self, query_id: str) -> tuple[str, str | None]:
        """The query's state (``QUEUED``, ``RUNNING``, ``SUCCEEDED``, ``FAILED``, ``CANCELLED``) and why it failed."""
        ...


class RecentRuns(Protocol):
    def recent_runs(self, crawl: str, limit: int) -> list[RunState]: ...


@dataclass(frozen=True, slots=True)
class Unload:
    """One ``UNLOAD`` statement: the table it reads, where it writes, the page type it copies (None: every)."""

    kind: str | None
    table: str
    location: str
    sql: str


def unload_sql(table: str, columns: Sequence[Column], run_id: str, location: str) -> str:
    """The statement: the table's columns of one run, as Parquet with zstd, into ``location`` (which must be empty)."""
    if not _SAFE_RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not a run id (letters, digits and '-')")
    names = ", ".join(f'"{c.name}"' for c in columns)  # the spec's validated field names, quoted
    return (
        f"UNLOAD (SELECT {names} FROM \"{table}\" WHERE run = '{run_id}') "  # noqa: S608
        f"TO '{location}' WITH (format = 'PARQUET', compression = 'ZSTD')"
    )


def unloads(spec: CrawlSpec, bucket: str, run_id: str) -> list[Unload]:
    """The statements that copy a run: one over the crawl's table, or one per page type over the type's table."""
    folder = f"s3://{bucket}/{parquet_prefix(spec.name, run_id)}"
    if spec.types is None:
        table = table_name(spec.name)
        return [Unload(None, table, folder, unload_sql(table, record_columns(spec), run_id, folder))]
    copies = []
    for kind in spec.types:
        table, location = type_table_name(spec.name, kind), f"{folder}type={kind}/"
        copies.append(Unload(kind, table, location, unload_sql(table, type_columns(spec, kind), run_id, location)))
    return copies


def request_token(crawl: str, run_id: str, kind: str | None, generation: str) -> str:
    """Athena's idempotency token (32 to 128 characters): a redelivered start gets the query already started."""
    return hashlib.sha256(f"{crawl}\n{run_id}\n{kind or ''}\n{generation}".encode()).hexdigest()


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).isoformat(timespec="seconds")


def start_copy(
    engine: QueryEngine,
    objects: CopyStore,
    spec: CrawlSpec,
    bucket: str,
    run_id: str,
    *,
    now: datetime,
    generation: str = FINALIZED,
) -> CopyState:
    """Start the run's ``UNLOAD``s, once per generation: a copy already started in it is left as it is.

    A start Athena refuses is recorded (``NOT_STARTED``, with why) and logged; the sweep tries it again."""
    known = read_state(objects, spec.name, run_id)
    if known is not None and known.generation == generation and known.status != "NOT_STARTED":
        return known
    # Started before (a start refused part-way): those queries stand, the others are started now.
    before = (
        {t.table: t for t in known.tables if t.query_id} if known is not None and known.generation == generation else {}
    )
    state = CopyState(spec.name, run_id, generation, "RUNNING", _stamp(now))
    for unload in unloads(spec, bucket, run_id):
        if unload.table in before:
            state.tables.append(before[unload.table])
            continue
        copied = CopiedTable(unload.kind, unload.table, unload.location)
        state.tables.append(copied)
        try:
            copied.query_id = engine.start(unload.sql, request_token(spec.name, run_id, unload.kind, generation))
        except QueryRefused as exc:
            copied.state, copied.reason = "NOT_STARTED", str(exc)[:500]
            if state.status != "NOT_STARTED":  # the first refusal is the reason given
                state.status, state.reason = "NOT_STARTED", f"Athena refused the UNLOAD of {unload.table}: {exc}"[:500]
    objects.put(copy_state_key(spec.name, run_id), state.to_json(), "application/json")
    if state.status == "NOT_STARTED":
        _alert(state)
    else:
        logger.info(
            "parquet copy started",
            extra={"crawl": spec.name, "run_id": run_id, "queries": [t.query_id for t in state.tables]},
        )
    return state


def check_copy(engine: QueryEngine, objects: CopyStore, state: CopyState, *, now: datetime) -> CopyState:
    """A running copy's queries read back: SUCCEEDED when every one did, FAILED (recorded, alerted) when one did not."""
    if state.status != "RUNNING":
        return state
    for table in state.tables:
        if table.query_id is None or table.state in FINISHED_STATES:
            continue
        try:
            table.state, table.reason = engine.state(table.query_id)
        except QueryRefused as exc:
            logger.warning(
                "parquet copy not checked", extra={"crawl": state.crawl, "run_id": state.run_id, "reason": str(exc)}
            )
            return state  # the next sweep asks again
    states = [t.state for t in state.tables]
    if any(s in ("FAILED", "CANCELLED") for s in states):
        failed = next(t for t in state.tables if t.state in ("FAILED", "CANCELLED"))
        state.status = "FAILED"
        state.reason = f"the UNLOAD of {failed.table} ended {failed.state}: {failed.reason or 'no reason given'}"[:500]
    elif all(s == "SUCCEEDED" for s in states):
        state.status = "SUCCEEDED"
    state.checked_at = _stamp(now)
    objects.put(copy_state_key(state.crawl, state.run_id), state.to_json(), "application/json")
    if state.status == "FAILED":
        _alert(state)
    elif state.status == "SUCCEEDED":
        logger.info("parquet written", extra={"crawl": state.crawl, "run_id": state.run_id})
    return state


def check_recent(
    engine: QueryEngine,
    objects: CopyStore,
    ledger: RecentRuns,
    specs: Sequence[CrawlSpec],
    bucket: str,
    *,
    now: datetime,
) -> list[CopyState]:
    """The sweep's look at each crawl's recently finished runs: a running copy checked, a refused one started
    again, a missing one (the finalizer stopped between its verdict and the start) started and said so."""
    seen: list[CopyState] = []
    for spec in specs:
        for run in ledger.recent_runs(spec.name, RECENT_RUNS):
            if not _copied(run) or run.finished_at is None:
                continue
            finished = datetime.fromisoformat(run.finished_at)
            if now - finished > CHECK_WINDOW:
                continue
            state = read_state(objects, spec.name, run.run_id)
            if state is None:
                if now - finished < MISSING_AFTER:
                    continue  # its finalizer may be starting it right now
                logger.warning(
                    "parquet copy missing: starting it",
                    extra={"event": "alert", "crawl": spec.name, "run_id": run.run_id, "check": "parquet"},
                )
                state = start_copy(engine, objects, spec, bucket, run.run_id, now=now)
            elif state.status == "NOT_STARTED":
                state = start_copy(engine, objects, spec, bucket, run.run_id, now=now, generation=state.generation)
            else:
                state = check_copy(engine, objects, state, now=now)
            seen.append(state)
    return seen


def _copied(run: RunState) -> bool:
    """A finished run with records has a copy; a run that ended failed or empty has none to make."""
    return run.status == "finished" and bool(run.records)


def emit_copy_failed(crawl: str) -> None:
    """``ParquetFailed`` 1 for ``crawl``, the crawl as its only dimension (as every run metric): its alarm pages."""
    metrics.add_dimension(CRAWL_DIMENSION, crawl)
    metric = RunMetric.PARQUET_FAILED
    metrics.add_metric(name=metric.value, unit=UNITS[metric].value, value=1.0)
    metrics.flush_metrics()


def _alert(state: CopyState) -> None:
    """A copy that failed or was refused: logged as an alert and counted, so the crawl's alarm pages someone."""
    emit_copy_failed(state.crawl)
    logger.error(
        "parquet not written",
        extra={
            "event": "alert",
            "crawl": state.crawl,
            "run_id": state.run_id,
            "check": "parquet",
            "detail": f"{state.reason}: the JSON Lines records are the run's output",
        },
    )


@dataclass(frozen=True, slots=True)
class ParquetCopy:
    """Where the stack copies runs as Parquet: Athena in the copy's own workgroup, into the records bucket."""

    engine: QueryEngine
    bucket: str


def copy_finished(services: Services, finalized: Sequence[Finalized]) -> list[CopyState]:
    """The finalizer's step after its verdicts: each finalized run with records gets its copy started."""
    if services.parquet is None:
        return []
    copy, started = services.parquet, []
    for done in finalized:
        if done.summary.records_total:
            spec = services.spec(done.crawl)
            started.append(
                start_copy(copy.engine, services.objects, spec, copy.bucket, done.run_id, now=services.clock.now())
            )
    return started


def sweep_copies(services: Services) -> list[CopyState]:
    """The sweep's step: the recent runs' copies of every crawl shipped with the functions checked."""
    if services.parquet is None:
        return []
    names = sorted({p.stem for p in spec_files(services.specs_dir)})
    specs = [services.spec(name) for name in names]
    copy = services.parquet
    return check_recent(copy.engine, services.objects, services.ledger, specs, copy.bucket, now=services.clock.now())

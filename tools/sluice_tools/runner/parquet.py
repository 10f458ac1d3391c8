"""A finished local run's records written again as Parquet, by DuckDB, typed as the Glue table.

Called once the run is finalized, so the verdict never waits for it; a failure leaves the JSON Lines
(the run's output) as they are, is logged and is said in the run's result (``notes``), never hidden.
The files go beside the JSON Lines (:func:`~sluice.domain.layout.parquet_prefix`): one
``records.parquet`` (a spec with types: one per ``type=TYPE/``), then ``done.json`` with what was
written. Each file is written under a temporary name and renamed; ``done.json`` goes first to go and
last to come, so a query (`sluice query`) reads a run's Parquet only when all of it is there.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from sluice.domain.layout import parquet_prefix
from sluice.observability import logger
from sluice.spec import CrawlSpec
from sluice_tools.ops.query import PARQUET_DONE, CrawlTable
from sluice_tools.runner.session import LocalRun

COMPRESSION = "zstd"
ROW_GROUP_ROWS = 20_000
"""Rows a Parquet row group holds: DuckDB keeps one whole in memory before it writes it out, so this (with one
thread) bounds the copy's memory whatever the run's size. Measured at 200,000 and 1,000,000 records (66 and
301 MB of JSON Lines), the copy's peak over the process was 227 and 467–568 MB at DuckDB's defaults (a
122,880-row group per core), 83–93 MB on one thread with these groups, in about 30 % less CPU time; the file
is 2–3 % larger (docs/engine-experiments.md)."""
COPY_SETTINGS = {"threads": 1}
"""One thread: the copy runs after the run is finalized, and each extra thread holds a row group of its own."""


class ParquetFailed(Exception):
    """The Parquet copy could not be written; the run's JSON Lines are untouched."""


@dataclass(frozen=True, slots=True)
class ParquetOutput:
    folder: Path
    rows: int
    bytes: int
    files: int
    seconds: float


def _tables(spec: CrawlSpec, objects: Path, run_id: str) -> list[tuple[str | None, CrawlTable]]:
    if spec.types is None:
        return [(None, CrawlTable.of(spec, objects).of_run(run_id))]
    return [(kind, CrawlTable.of_type(spec, kind, objects).of_run(run_id)) for kind in spec.types]


def write_parquet(spec: CrawlSpec, objects: Path, run_id: str) -> ParquetOutput:
    """Write the run's records as Parquet; ParquetFailed says why not (the JSON Lines stay the output)."""
    started = time.monotonic()
    folder = objects / parquet_prefix(spec.name, run_id)
    (folder / PARQUET_DONE).unlink(missing_ok=True)  # a query reads the JSON Lines from here on
    shutil.rmtree(folder, ignore_errors=True)
    rows = size = files = 0
    db = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, **COPY_SETTINGS})
    try:
        for kind, table in _tables(spec, objects, run_id):
            if not table.files:
                continue
            target = folder / (f"type={kind}/records.parquet" if kind is not None else "records.parquet")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".tmp")
            db.execute(table.view_sql())
            columns = ", ".join(f'"{c.name}"' for c in table.record_columns)  # validated names, quoted
            path = str(partial).replace("'", "''")
            # COPY answers with the rows it wrote: the file is not read back to count them.
            copied = db.execute(
                f"COPY (SELECT {columns} FROM \"{table.name}\") TO '{path}' "  # noqa: S608
                f"(FORMAT parquet, COMPRESSION {COMPRESSION}, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
            ).fetchone()
            db.execute(f'DROP VIEW "{table.name}"')
            os.replace(partial, target)
            rows += int(copied[0]) if copied is not None else 0
            size += target.stat().st_size
            files += 1
    except (duckdb.Error, OSError) as exc:
        raise ParquetFailed(f"Parquet not written ({type(exc).__name__}: {str(exc).splitlines()[0]})") from exc
    finally:
        db.close()
    if files:
        done = {"rows": rows, "bytes": size, "files": files, "compression": COMPRESSION}
        (folder / PARQUET_DONE).write_text(json.dumps(done) + "\n", encoding="utf-8")
    return ParquetOutput(folder, rows, size, files, time.monotonic() - started)


def with_parquet(run: LocalRun, spec: CrawlSpec, objects: Path) -> LocalRun:
    """The finished run with its Parquet copy written: in ``outputs["parquet"]``, or a note saying why not."""
    try:
        written = write_parquet(spec, objects, run.run_id)
    except ParquetFailed as exc:
        logger.warning("parquet not written", extra={"crawl": spec.name, "run_id": run.run_id, "reason": str(exc)})
        return replace(run, notes=[*run.notes, f"{exc}: the JSON Lines records are the run's output"])
    if not written.files:
        return run
    logger.info(
        "parquet written",
        extra={"crawl": spec.name, "run_id": run.run_id, "rows": written.rows, "bytes": written.bytes},
    )
    return replace(run, outputs={**run.outputs, "parquet": str(written.folder)})


def rewrite_parquet(spec: CrawlSpec, objects: Path, run_id: str) -> None:
    """After a run's records were rebuilt (`sluice reextract`): its Parquet copy written again, or logged as not."""
    try:
        write_parquet(spec, objects, run_id)
    except ParquetFailed as exc:
        logger.warning("parquet not written", extra={"crawl": spec.name, "run_id": run_id, "reason": str(exc)})

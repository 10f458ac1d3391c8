"""`sluice query`: SQL over the local output with DuckDB, each crawl a view named and typed as its Athena table.

A crawl's view reads every ``runs/crawl=NAME/run=ID/records/part-*.jsonl`` under the state
folder's objects (the keys S3 holds) with DuckDB's JSON reader (or the run's Parquet copy, where one
was written), with the columns
:mod:`sluice.spec.columns` gives the Glue table (never auto-detected, so a type never drifts with
the data) and the path's ``crawl`` and ``run`` as partition columns: a query written here runs on
Athena unchanged. A record line's keys are the spec's field names as written; Athena's JSON SerDe
matches them without regard to case, so the view reads each by its own name and names it in
lower case, as the table does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from sluice.domain.layout import RUNS_PREFIX, crawl_of_prefix, crawl_prefix
from sluice.pipeline.services import UnknownCrawl, load_crawl
from sluice.spec import SpecError, spec_files
from sluice.spec.columns import (
    PARTITIONS,
    PROVENANCE,
    Column,
    field_names,
    partitions,
    record_columns,
    table_name,
    type_columns,
    type_fields,
    type_table_name,
)
from sluice.spec.models import CrawlSpec

PART_GLOB = "run=*/records/part-*.jsonl"
"""A crawl's output parts under its prefix (a part being written is ``part-N.jsonl.tmp-X``: not matched)."""
TYPED_PART_GLOB = "run=*/records/type=*/part-*.jsonl"
"""A spec with page types writes each type's parts under its own folder: one view for all, partitioned by type,
and a view per type (``NAME__TYPE``) over its folder alone."""
PARQUET_GLOB = "run=*/parquet/records.parquet"
TYPED_PARQUET_GLOB = "run=*/parquet/type=*/records.parquet"
"""A run's records as Parquet (:mod:`sluice_tools.runner.parquet`), laid out as its JSON Lines are."""


class QueryError(Exception):
    """A query DuckDB refused, or output that cannot be read; one line that names the tables there are."""


PARQUET_DONE = "done.json"
"""Written last by the Parquet writer (:mod:`sluice_tools.runner.parquet`): a run's Parquet is read only then."""


def _run_folder(path: Path) -> Path:
    return next(p for p in path.parents if p.name.startswith("run="))


@dataclass(frozen=True, slots=True)
class CrawlTable:
    """One crawl's view: its name, its columns (the record's, then the partitions) and the files it reads.

    A run whose records were also written as Parquet (``parquet/done.json`` there) is read from its Parquet
    files; every other run from its JSON Lines parts. Both are typed as the Glue table."""

    crawl: str
    name: str
    columns: list[Column]
    keys: list[str]
    """The key each record column has in a record line, in column order (the spec's field names as written)."""
    files: list[Path]
    """JSON Lines parts, of the runs without Parquet."""
    parquet: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, spec: CrawlSpec, objects: Path) -> CrawlTable:
        columns = record_columns(spec)
        provenance = [c.name for c in PROVENANCE] + ([] if spec.types is None else ["_type"])
        keys = provenance + field_names(spec)
        folder = objects / crawl_prefix(spec.name)
        parts = PART_GLOB if spec.types is None else TYPED_PART_GLOB
        parquet = PARQUET_GLOB if spec.types is None else TYPED_PARQUET_GLOB
        return cls._split(spec.name, table_name(spec.name), [*columns, *partitions(spec)], keys, folder, parts, parquet)

    @classmethod
    def of_type(cls, spec: CrawlSpec, kind: str, objects: Path) -> CrawlTable:
        """A page type's own view, as its Glue table: its fields and those carried to it, over its folder."""
        keys = [c.name for c in PROVENANCE] + ["_type", *type_fields(spec, kind)]
        columns = [*type_columns(spec, kind), *PARTITIONS]
        folder = objects / crawl_prefix(spec.name)
        parts, parquet = f"run=*/records/type={kind}/part-*.jsonl", f"run=*/parquet/type={kind}/records.parquet"
        return cls._split(spec.name, type_table_name(spec.name, kind), columns, keys, folder, parts, parquet)

    @classmethod
    def _split(
        cls, crawl: str, name: str, columns: list[Column], keys: list[str], folder: Path, parts: str, parquet: str
    ) -> CrawlTable:
        done = {f.parent.parent for f in folder.glob(f"run=*/parquet/{PARQUET_DONE}")}
        jsonl = [f for f in sorted(folder.glob(parts)) if _run_folder(f) not in done]
        columnar = [f for f in sorted(folder.glob(parquet)) if _run_folder(f) in done]
        return cls(crawl, name, columns, keys, jsonl, columnar)

    def of_run(self, run_id: str) -> CrawlTable:
        """The same view over one run's JSON Lines alone (what the Parquet writer reads)."""
        own = [f for f in self.files if _run_folder(f).name == f"run={run_id}"]
        return CrawlTable(self.crawl, self.name, self.columns, self.keys, own)

    @property
    def runs(self) -> int:
        return len({_run_folder(f) for f in [*self.files, *self.parquet]})

    @property
    def record_columns(self) -> list[Column]:
        return self.columns[: len(self.keys)]

    def view_sql(self) -> str:
        """The view's ``CREATE VIEW``: the JSON and Parquet readers with explicit types, or no rows if none."""
        selects = [s for s in (self._json_select(), self._parquet_select()) if s is not None]
        if not selects:
            nothing = ", ".join(f"CAST(NULL AS {c.duckdb}) AS {_name(c.name)}" for c in self.columns)
            return f"CREATE VIEW {_name(self.name)} AS SELECT {nothing} WHERE false"
        return f"CREATE VIEW {_name(self.name)} AS " + " UNION ALL ".join(selects)

    def _hive_types(self) -> str:
        return ", ".join(f"{_text(c.name)}: {_text(c.duckdb)}" for c in self.columns[len(self.keys) :])

    def _json_select(self) -> str | None:
        if not self.files:
            return None
        record = self.record_columns
        read = ", ".join(f"{_text(key)}: {_text(c.duckdb)}" for key, c in zip(self.keys, record, strict=True))
        files = ", ".join(_text(str(f)) for f in self.files)
        select = ", ".join(
            [*(f"{_name(key)} AS {_name(c.name)}" for key, c in zip(self.keys, record, strict=True))]
            + [_name(c.name) for c in self.columns[len(self.keys) :]]
        )
        # Every name and path is quoted by _name and _text (a crawl's and its fields' names are validated too).
        return (
            f"SELECT {select} FROM read_json([{files}], "  # noqa: S608
            f"columns = {{{read}}}, format = 'newline_delimited', "
            f"hive_partitioning = true, hive_types = {{{self._hive_types()}}})"
        )

    def _parquet_select(self) -> str | None:
        if not self.parquet:
            return None
        select = ", ".join(f"CAST({_name(c.name)} AS {c.duckdb}) AS {_name(c.name)}" for c in self.columns)
        files = ", ".join(_text(str(f)) for f in self.parquet)
        return (
            f"SELECT {select} FROM read_parquet([{files}], "  # noqa: S608
            f"hive_partitioning = true, hive_types = {{{self._hive_types()}}}, union_by_name = true)"
        )


@dataclass(frozen=True, slots=True)
class Tables:
    """Every crawl's view that can be made, and why the others cannot (a crawl's output with no spec)."""

    tables: list[CrawlTable]
    notes: list[str]

    def describe(self) -> str:
        named = ", ".join(f"{t.name} ({t.runs} run{'' if t.runs == 1 else 's'} with records)" for t in self.tables)
        return f"tables: {named or 'none'}"


def crawl_tables(state_dir: Path, specs_dir: Path) -> Tables:
    """A view per crawl: each spec in ``specs_dir``, and each crawl with output in the state folder."""
    objects = state_dir.resolve() / "objects"
    with_output = {
        crawl
        for folder in (objects / RUNS_PREFIX).glob("crawl=*")
        if folder.is_dir() and (crawl := crawl_of_prefix(f"{RUNS_PREFIX}{folder.name}/")) is not None
    }
    specified = {p.stem for p in spec_files(specs_dir)}
    tables: list[CrawlTable] = []
    notes = [] if objects.is_dir() else [f"no output in {state_dir}/ yet (`sluice run` writes it there)"]
    for crawl in sorted(with_output | specified):
        try:
            spec = load_crawl(specs_dir, crawl)
        except SpecError as exc:
            notes.append(f"{crawl}: its spec is invalid, no table ({exc.errors[0] if exc.errors else exc})")
            continue
        except UnknownCrawl:
            notes.append(f"{crawl}: has output but no spec in {specs_dir}/ to type its columns, no table")
            continue
        own = [CrawlTable.of(spec, objects), *(CrawlTable.of_type(spec, kind, objects) for kind in spec.types or {})]
        problem = _views_problem(own)
        if problem is not None:  # one crawl's view that cannot be made leaves the others' queries working
            notes.append(f"{crawl}: its view cannot be made, no table ({problem})")
            continue
        tables.extend(own)
    return Tables(tables, notes)


def _views_problem(tables: list[CrawlTable]) -> str | None:
    """Why one crawl's views cannot be made, each on its own (a scratch database: nothing is read), or None."""
    db = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    try:
        for table in tables:
            db.execute(table.view_sql())
    except duckdb.Error as exc:
        return _first_line(exc)
    finally:
        db.close()
    return None


def run_query(sql: str, tables: Tables) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of ``sql`` over the crawls' views; QueryError says what went wrong in one line."""
    db = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    try:
        for table in tables.tables:
            db.execute(table.view_sql())
        result = db.execute(sql)
        columns = [d[0] for d in result.description or []]
        rows = result.fetchall() if result.description else []
    except duckdb.Error as exc:
        raise QueryError(f"{_first_line(exc)} ({tables.describe()})") from exc
    finally:
        db.close()
    return columns, rows


def _first_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"

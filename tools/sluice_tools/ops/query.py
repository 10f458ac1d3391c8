"""`sluice query`: SQL over the local output with DuckDB, each crawl a view named and typed as its Athena table.

A crawl's view reads every ``runs/crawl=NAME/run=ID/records/part-*.jsonl`` under the state
folder's objects (the keys S3 holds) with DuckDB's JSON reader, with the columns
:mod:`sluice.spec.columns` gives the Glue table (never auto-detected, so a type never drifts with
the data) and the path's ``crawl`` and ``run`` as partition columns: a query written here runs on
Athena unchanged. A record line's keys are the spec's field names as written; Athena's JSON SerDe
matches them without regard to case, so the view reads each by its own name and names it in
lower case, as the table does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from sluice.domain.layout import RUNS_PREFIX, crawl_of_prefix, crawl_prefix
from sluice.pipeline.services import UnknownCrawl, load_crawl
from sluice.spec import SpecError
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
from sluice.spec.load import SPEC_SUFFIXES
from sluice.spec.models import CrawlSpec

PART_GLOB = "run=*/records/part-*.jsonl"
"""A crawl's output parts under its prefix (a part being written is ``part-N.jsonl.tmp-X``: not matched)."""
TYPED_PART_GLOB = "run=*/records/type=*/part-*.jsonl"
"""A spec with page types writes each type's parts under its own folder: one view for all, partitioned by type,
and a view per type (``NAME__TYPE``) over its folder alone."""


class QueryError(Exception):
    """A query DuckDB refused, or output that cannot be read; one line that names the tables there are."""


@dataclass(frozen=True, slots=True)
class CrawlTable:
    """One crawl's view: its name, its columns (the record's, then the partitions) and the files it reads."""

    crawl: str
    name: str
    columns: list[Column]
    keys: list[str]
    """The key each record column has in a record line, in column order (the spec's field names as written)."""
    files: list[Path]

    @classmethod
    def of(cls, spec: CrawlSpec, objects: Path) -> CrawlTable:
        columns = record_columns(spec)
        provenance = [c.name for c in PROVENANCE] + ([] if spec.types is None else ["_type"])
        keys = provenance + field_names(spec)
        files = sorted((objects / crawl_prefix(spec.name)).glob(PART_GLOB if spec.types is None else TYPED_PART_GLOB))
        return cls(spec.name, table_name(spec.name), [*columns, *partitions(spec)], keys, files)

    @classmethod
    def of_type(cls, spec: CrawlSpec, kind: str, objects: Path) -> CrawlTable:
        """A page type's own view, as its Glue table: its fields and those carried to it, over its folder."""
        keys = [c.name for c in PROVENANCE] + ["_type", *type_fields(spec, kind)]
        files = sorted((objects / crawl_prefix(spec.name)).glob(f"run=*/records/type={kind}/part-*.jsonl"))
        columns = [*type_columns(spec, kind), *PARTITIONS]
        return cls(spec.name, type_table_name(spec.name, kind), columns, keys, files)

    @property
    def runs(self) -> int:
        return len({next(p.name for p in f.parents if p.name.startswith("run=")) for f in self.files})

    def view_sql(self) -> str:
        """The view's ``CREATE VIEW``: the JSON reader with explicit columns, or no rows if no run wrote any."""
        record = self.columns[: len(self.keys)]
        if not self.files:
            nothing = ", ".join(f"CAST(NULL AS {c.duckdb}) AS {_name(c.name)}" for c in self.columns)
            return f"CREATE VIEW {_name(self.name)} AS SELECT {nothing} WHERE false"
        read = ", ".join(f"{_text(key)}: {_text(c.duckdb)}" for key, c in zip(self.keys, record, strict=True))
        parts = self.columns[len(self.keys) :]
        hive_types = ", ".join(f"{_text(c.name)}: {_text(c.duckdb)}" for c in parts)
        files = ", ".join(_text(str(f)) for f in self.files)
        select = ", ".join(
            [*(f"{_name(key)} AS {_name(c.name)}" for key, c in zip(self.keys, record, strict=True))]
            + [_name(c.name) for c in parts]
        )
        # Every name and path is quoted by _name and _text (a crawl's and its fields' names are validated too).
        return (
            f"CREATE VIEW {_name(self.name)} AS SELECT {select} FROM read_json([{files}], "  # noqa: S608
            f"columns = {{{read}}}, format = 'newline_delimited', "
            f"hive_partitioning = true, hive_types = {{{hive_types}}})"
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
    specified = {p.stem for p in specs_dir.glob("*") if p.suffix in SPEC_SUFFIXES} if specs_dir.is_dir() else set()
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

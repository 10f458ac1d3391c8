"""The columns of a crawl's records as a query engine sees them: Athena's Glue table, DuckDB locally.

One source for both, so a query written against ``sluice query`` runs on Athena unchanged: the
provenance columns every record line carries (``_key``, ``_page``), then the spec's fields in
order, typed by the step that makes their value last (``int`` a bigint, ``number`` and ``price``
a double, anything else a string; ``many`` an array of that), then the partitions the output
layout gives (``crawl``, ``run``: ``runs/crawl=NAME/run=ID/records/``). Types are Hive's, the
names Athena uses; :meth:`Column.duckdb` gives DuckDB's.

A spec with page types has one table over every type (``_type`` and a ``type`` partition, each
field once) and a table per type (:func:`type_columns`): the type's own fields and those carried to
it, typed as the type that has them, over the type's folder only.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.spec.models import CrawlSpec, ExtractField

_NUMERIC = {"int": "bigint", "number": "double", "price": "double"}
_DUCKDB = {"string": "VARCHAR", "bigint": "BIGINT", "double": "DOUBLE"}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    """Hive / Athena: ``string``, ``bigint``, ``double``, or ``array<...>`` of one."""

    @property
    def duckdb(self) -> str:
        if self.type.startswith("array<"):
            return _DUCKDB[self.type[6:-1]] + "[]"
        return _DUCKDB[self.type]


PROVENANCE = (Column("_key", "string"), Column("_page", "string"))
PARTITIONS = (Column("crawl", "string"), Column("run", "string"))
TYPE_PARTITION = Column("type", "string")
"""A spec with page types writes each type's records under ``records/type=NAME/``: a third partition."""


def partitions(spec: CrawlSpec) -> list[Column]:
    """The partitions of a crawl's table: crawl and run, and the page type for a spec with ``types``."""
    return [*PARTITIONS, *([TYPE_PARTITION] if spec.types is not None else [])]


def table_name(crawl: str) -> str:
    """A crawl's table: its name with ``-`` as ``_`` (``demo-books`` is ``demo_books``)."""
    return crawl.replace("-", "_")


def field_type(field: ExtractField) -> str:
    kind = "string"
    for step in field.process:
        kind = _NUMERIC.get(step, "string") if isinstance(step, str) else "string"
    return f"array<{kind}>" if field.many else kind


def record_columns(spec: CrawlSpec) -> list[Column]:
    """A record line's columns, provenance first (partitions not included: see :data:`PARTITIONS`).

    A spec with ``types`` has ``_type`` too, then every type's fields (a name two types share once,
    typed as the first type has it)."""
    fields: dict[str, ExtractField] = {}
    for extract in spec.extracts().values():
        for name, f in extract.fields.items():
            fields.setdefault(name, f)
    provenance = PROVENANCE if spec.types is None else (*PROVENANCE, Column("_type", "string"))
    return [*provenance, *(Column(name.lower(), field_type(f)) for name, f in fields.items())]


def field_names(spec: CrawlSpec) -> list[str]:
    """The spec's field names as written, in :func:`record_columns` order (every type's, each once)."""
    return list(dict.fromkeys(name for extract in spec.extracts().values() for name in extract.fields))


def type_table_name(crawl: str, kind: str) -> str:
    """A page type's table: the crawl's table name, two underscores, the type (``demo_books__book``).

    Two underscores, since a crawl's name has none of its own once ``-`` is ``_`` only in single ones."""
    return f"{table_name(crawl)}__{kind}"


def parquet_table_name(crawl: str, kind: str | None = None) -> str:
    """The table over a run's Parquet copy: its JSON table's name and ``_parquet`` (``demo_books_parquet``)."""
    return f"{table_name(crawl) if kind is None else type_table_name(crawl, kind)}_parquet"


def type_fields(spec: CrawlSpec, kind: str) -> dict[str, ExtractField]:
    """A page type's fields as its records have them: its own, then each field a rule leading to it carries
    (a rule in its ``via``, or any rule if it has none) and it lacks, as the carrying type extracts it.
    A ``many`` field is not carried (only JSON scalars travel), so it is left out."""
    types = spec.types or {}
    target = types[kind]
    fields = dict(target.extract.fields)
    for source in types.values():
        for rule_name, rule in source.follow.items():
            if target.via and rule_name not in target.via:
                continue
            for name in rule.carry:
                carried = source.extract.fields[name]
                if not carried.many:
                    fields.setdefault(name, carried)
    return fields


def type_columns(spec: CrawlSpec, kind: str) -> list[Column]:
    """A page type's table's columns: provenance, ``_type``, then :func:`type_fields` (partitions not included)."""
    provenance = (*PROVENANCE, Column("_type", "string"))
    return [*provenance, *(Column(name.lower(), field_type(f)) for name, f in type_fields(spec, kind).items())]

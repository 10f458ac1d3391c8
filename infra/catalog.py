"""The Glue catalog over the runs' output: one database per stage, one table per crawl spec, and for a
spec with page types one more per type (its own fields and those carried to it, over its folder); and
each of them again, named ``..._parquet``, over the run's Parquet copy (``sluice.pipeline.finalize.columnar``).

Partition projection computes a query's partitions from the table's own parameters, so there is
no Glue crawler and no ``MSCK REPAIR TABLE``: a run's records are queryable the moment the
finalizer has written them. Columns, types and partitions come from ``sluice.spec.columns``,
the same source as the local DuckDB view (``sluice query``), so a query runs on both unchanged.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import StackConfig
from sluice.domain.layout import RUNS_PREFIX, parquet_prefix, records_prefix
from sluice.spec import CrawlSpec
from sluice.spec.columns import (
    PARTITIONS,
    Column,
    parquet_table_name,
    partitions,
    record_columns,
    table_name,
    type_columns,
    type_table_name,
)

# Hive's text formats with the OpenX JSON SerDe: one record a line, as the finalizer writes them.
INPUT_FORMAT = "org.apache.hadoop.mapred.TextInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
SERDE_PARAMETERS = {
    # A line that is not JSON fails the query, naming the file: the finalizer writes only whole
    # JSON lines, so a bad one is corruption to see, not a row to drop in silence.
    "ignore.malformed.json": "FALSE",
    # Column names are lower case (record_columns); a spec's field may not be.
    "case.insensitive": "TRUE",
    "dots.in.keys": "FALSE",
}
# The Parquet copy, as Athena's UNLOAD writes it: columns read by name, so a type's files leave the
# columns they lack null in the crawl's table over every type.
PARQUET_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def location_template(bucket: str, *, typed: bool = False, kind: str | None = None, parquet: bool = False) -> str:
    """Where projection finds a partition's files: exactly the layout's records folder of a crawl's run
    (and, for a spec with page types, the type's folder in it); with ``parquet``, the run's Parquet copy.

    ``records/`` and not the run's folder: beside it are ``pages.index`` (binary), ``manifest.json``
    and ``summary.json``, which Athena would otherwise read as records.
    """
    place = parquet_prefix if parquet else records_prefix
    folder = f"s3://{bucket}/{place('${crawl}', '${run}')}"
    if kind is not None:
        return f"{folder}type={kind}/"
    return f"{folder}type=${{type}}/" if typed else folder


def projection(spec: CrawlSpec, bucket: str, kind: str | None = None, *, parquet: bool = False) -> dict[str, str]:
    """The table parameters that project its partitions (Athena reads them; Glue stores them); ``kind``: the
    table of one page type, whose partitions are the crawl and the run (its folder is fixed)."""
    return {
        "projection.enabled": "true",
        # One crawl a table: its name is the only value.
        "projection.crawl.type": "enum",
        "projection.crawl.values": spec.name,
        # Run ids (20261201T021500Z-1a2b3c) end in a random part, so no range or date format can
        # enumerate them: "injected" takes them from the query, which must name its runs
        # (WHERE run = '...' or run IN (...)). A query that does not is refused before it scans.
        "projection.run.type": "injected",
        **(
            {"projection.type.type": "enum", "projection.type.values": ",".join(spec.types)}
            if spec.types is not None and kind is None
            else {}
        ),
        "storage.location.template": location_template(
            bucket, typed=spec.types is not None, kind=kind, parquet=parquet
        ),
    }


class RecordsCatalog(Construct):
    """The stage's Glue database and a table per crawl over ``runs/crawl=NAME/run=ID/records/``."""

    def __init__(
        self, scope: Construct, id: str, *, config: StackConfig, bucket: s3.IBucket, specs: list[CrawlSpec]
    ) -> None:
        super().__init__(scope, id)
        account = Stack.of(self).account
        self.database_name = config.glue_database
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description=f"Sluice {config.stage}: the records of each crawl's runs (docs/querying.md)",
            ),
        )
        # A Glue table takes no tags in CloudFormation, so the crawl is in its name and description.
        self.tables: dict[str, glue.CfnTable] = {}
        """Every table, by name: the JSON ones and their ``_parquet`` twins (what the query policy grants)."""
        self.json_tables: list[str] = []
        """The tables over the JSON Lines: what the Parquet copy's ``UNLOAD`` reads."""
        for spec in specs:
            for kind in [None, *(spec.types or {})]:
                for parquet in (False, True):
                    self._add(spec, bucket.bucket_name, kind, parquet=parquet)

    def _add(self, spec: CrawlSpec, bucket: str, kind: str | None, *, parquet: bool) -> None:
        table_input = self._table_input(spec, bucket, kind, parquet=parquet)
        suffix = "" if kind is None else f"-{kind}"
        table = glue.CfnTable(
            self,
            f"Table-{spec.name}{suffix}{'-parquet' if parquet else ''}",
            catalog_id=Stack.of(self).account,
            database_name=self.database_name,
            table_input=table_input,
        )
        table.add_resource_dependency(self.database)
        name = str(table_input.name)
        self.tables[name] = table
        if not parquet:
            self.json_tables.append(name)

    @staticmethod
    def _table_input(
        spec: CrawlSpec, bucket: str, kind: str | None = None, *, parquet: bool = False
    ) -> glue.CfnTable.TableInputProperty:
        """A table over the run's JSON Lines (``records/``), or its twin over the run's Parquet copy (``parquet/``):
        the same columns (and types), partitions and projection. Over every type, the Parquet twin leaves out a
        column two types type differently (each type's files have it as their own type: read it in the type's
        table)."""
        if kind is None:
            columns: list[Column] = parquet_columns(spec) if parquet else record_columns(spec)
        else:
            columns = type_columns(spec, kind)
        keys = partitions(spec) if kind is None else list(PARTITIONS)
        what = f"crawl {spec.name}" if kind is None else f"page type {kind} of crawl {spec.name}"
        if parquet:
            name = parquet_table_name(spec.name, kind)
            description = f"Records of {what} as Parquet (the run's copy), partitioned by crawl and run"
            formats = (PARQUET_INPUT_FORMAT, PARQUET_OUTPUT_FORMAT)
            serde = glue.CfnTable.SerdeInfoProperty(serialization_library=PARQUET_SERDE)
        else:
            name = table_name(spec.name) if kind is None else type_table_name(spec.name, kind)
            description = f"Records of {what}, one row a record, partitioned by crawl and run"
            formats = (INPUT_FORMAT, OUTPUT_FORMAT)
            serde = glue.CfnTable.SerdeInfoProperty(serialization_library=JSON_SERDE, parameters=SERDE_PARAMETERS)
        return glue.CfnTable.TableInputProperty(
            name=name,
            description=description,
            table_type="EXTERNAL_TABLE",
            parameters={
                "EXTERNAL": "TRUE",
                "classification": "parquet" if parquet else "json",
                **projection(spec, bucket, kind, parquet=parquet),
            },
            partition_keys=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in keys],
            storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                columns=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in columns],
                location=f"s3://{bucket}/{RUNS_PREFIX}crawl={spec.name}/",
                input_format=formats[0],
                output_format=formats[1],
                serde_info=serde,
            ),
        )


def parquet_columns(spec: CrawlSpec) -> list[Column]:
    """The crawl's columns over its Parquet copy: the JSON table's, less any a page type's files type otherwise."""
    columns = record_columns(spec)
    if spec.types is None:
        return columns
    typed_as = {(c.name, c.type) for kind in spec.types for c in type_columns(spec, kind)}
    names = {name for name, _ in typed_as}
    return [c for c in columns if c.name not in names or all(t == c.type for n, t in typed_as if n == c.name)]

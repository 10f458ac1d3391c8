"""The Glue catalog over the runs' output: one database per stage, one table per crawl spec, and for a
spec with page types one more per type (its own fields and those carried to it, over its folder).

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
from sluice.domain.layout import RUNS_PREFIX, records_prefix
from sluice.spec import CrawlSpec
from sluice.spec.columns import (
    PARTITIONS,
    Column,
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


def location_template(bucket: str, *, typed: bool = False, kind: str | None = None) -> str:
    """Where projection finds a partition's files: exactly the layout's records folder of a crawl's run
    (and, for a spec with page types, the type's folder in it).

    ``records/`` and not the run's folder: beside it are ``pages.index`` (binary), ``manifest.json``
    and ``summary.json``, which Athena would otherwise read as records.
    """
    folder = f"s3://{bucket}/{records_prefix('${crawl}', '${run}')}"
    if kind is not None:
        return f"{folder}type={kind}/"
    return f"{folder}type=${{type}}/" if typed else folder


def projection(spec: CrawlSpec, bucket: str, kind: str | None = None) -> dict[str, str]:
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
        "storage.location.template": location_template(bucket, typed=spec.types is not None, kind=kind),
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
        for spec in specs:
            table = glue.CfnTable(
                self,
                f"Table-{spec.name}",
                catalog_id=account,
                database_name=self.database_name,
                table_input=self._table_input(spec, bucket.bucket_name),
            )
            table.add_resource_dependency(self.database)
            self.tables[table_name(spec.name)] = table
            for kind in spec.types or {}:
                own = glue.CfnTable(
                    self,
                    f"Table-{spec.name}-{kind}",
                    catalog_id=account,
                    database_name=self.database_name,
                    table_input=self._table_input(spec, bucket.bucket_name, kind),
                )
                own.add_resource_dependency(self.database)
                self.tables[type_table_name(spec.name, kind)] = own

    @staticmethod
    def _table_input(spec: CrawlSpec, bucket: str, kind: str | None = None) -> glue.CfnTable.TableInputProperty:
        columns: list[Column] = record_columns(spec) if kind is None else type_columns(spec, kind)
        keys = partitions(spec) if kind is None else list(PARTITIONS)
        what = f"crawl {spec.name}" if kind is None else f"page type {kind} of crawl {spec.name}"
        return glue.CfnTable.TableInputProperty(
            name=table_name(spec.name) if kind is None else type_table_name(spec.name, kind),
            description=f"Records of {what}, one row a record, partitioned by crawl and run",
            table_type="EXTERNAL_TABLE",
            parameters={"EXTERNAL": "TRUE", "classification": "json", **projection(spec, bucket, kind)},
            partition_keys=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in keys],
            storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                columns=[glue.CfnTable.ColumnProperty(name=c.name, type=c.type) for c in columns],
                location=f"s3://{bucket}/{RUNS_PREFIX}crawl={spec.name}/",
                input_format=INPUT_FORMAT,
                output_format=OUTPUT_FORMAT,
                serde_info=glue.CfnTable.SerdeInfoProperty(
                    serialization_library=JSON_SERDE, parameters=SERDE_PARAMETERS
                ),
            ),
        )

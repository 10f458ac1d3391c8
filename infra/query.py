"""Querying the output with Athena: a workgroup that holds its own limits, and the policy a querier needs;
and the Parquet copy's own workgroup, whose scan limit is sized to a whole run (the finalizer's only).

Each workgroup's configuration is enforced, so a client cannot send results elsewhere, unencrypted,
or past the scan limit. Results go to a prefix of the records bucket (already encrypted, private,
TLS-only and access-logged) that a lifecycle rule empties (``Storage``).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.catalog import RecordsCatalog
from infra.config import StackConfig
from sluice.domain.layout import RUNS_PREFIX

# What running a query, waiting for it and reading its results takes; nothing that changes the
# workgroup, and no named queries or prepared statements (a querier keeps SQL in files).
ATHENA_QUERY_ACTIONS = [
    "athena:StartQueryExecution",
    "athena:StopQueryExecution",
    "athena:GetQueryExecution",
    "athena:BatchGetQueryExecution",
    "athena:ListQueryExecutions",
    "athena:GetQueryResults",
    "athena:GetQueryResultsStream",
    "athena:GetQueryRuntimeStatistics",
    "athena:GetWorkGroup",
]
# Reading table definitions; partition reads for engines that ask though projection answers them.
GLUE_READ_ACTIONS = [
    "glue:GetDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
]
# Athena writes results with the querier's own credentials, and reads them back for GetQueryResults.
RESULTS_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


class Query(Construct):
    """The Athena workgroup over the records catalog, the managed policy "query the crawl output", and the
    Parquet copy's workgroup (granted to the finalizer in ``infra/functions.py``, never in the query policy)."""

    def __init__(
        self, scope: Construct, id: str, *, config: StackConfig, bucket: s3.IBucket, catalog: RecordsCatalog
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.catalog = catalog
        self.results_prefix = config.query_results_prefix
        self.results_location = f"s3://{bucket.bucket_name}/{config.query_results_prefix}"
        self.workgroup = _workgroup(
            self,
            "WorkGroup",
            name=config.workgroup,
            description=f"Sluice {config.stage}: queries of the crawl output, at most "
            f"{config.query_scan_limit_gb} GB scanned a query",
            cutoff=config.query_bytes_scanned_cutoff,
            output_location=self.results_location,
        )
        # The finalizer's Parquet copy reads a whole run's JSON Lines: a cut-off sized to the largest run
        # (parquet_scan_limit_gb), in a workgroup of its own so the users' queries keep theirs.
        self.copy_results_prefix = config.parquet_results_prefix
        self.copy_workgroup = _workgroup(
            self,
            "ParquetCopyWorkGroup",
            name=config.parquet_workgroup,
            description=f"Sluice {config.stage}: each finished run's Parquet copy (UNLOAD), at most "
            f"{config.parquet_scan_limit_gb} GB scanned a query",
            cutoff=config.parquet_bytes_scanned_cutoff,
            output_location=f"s3://{bucket.bucket_name}/{config.parquet_results_prefix}",
        )
        self.policy = iam.ManagedPolicy(
            self,
            "QueryOutputPolicy",
            managed_policy_name=config.query_policy,
            description=f"Query the Sluice {config.stage} crawl output with Athena in workgroup {config.workgroup}",
            statements=self._statements(config, stack, bucket, catalog),
        )

    def _statements(
        self, config: StackConfig, stack: Stack, bucket: s3.IBucket, catalog: RecordsCatalog
    ) -> list[iam.PolicyStatement]:
        workgroup_arn = stack.format_arn(service="athena", resource="workgroup", resource_name=config.workgroup)
        glue_arns = [
            stack.format_arn(service="glue", resource="catalog"),
            stack.format_arn(service="glue", resource="database", resource_name=catalog.database_name),
            *(
                stack.format_arn(
                    service="glue",
                    resource="table",
                    resource_name=f"{catalog.database_name}/{table}",
                    arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                )
                for table in catalog.tables
            ),
        ]
        results = config.query_results_prefix
        return [
            iam.PolicyStatement(
                sid="RunQueriesInTheWorkgroup", actions=ATHENA_QUERY_ACTIONS, resources=[workgroup_arn]
            ),
            iam.PolicyStatement(sid="ReadTheCatalog", actions=GLUE_READ_ACTIONS, resources=glue_arns),
            iam.PolicyStatement(sid="LocateTheBucket", actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]),
            iam.PolicyStatement(
                sid="ListRunsAndResults",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{RUNS_PREFIX}*", f"{results}*"]}},
            ),
            iam.PolicyStatement(
                sid="ReadRuns", actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{RUNS_PREFIX}*")]
            ),
            iam.PolicyStatement(
                sid="WriteAndReadResults", actions=RESULTS_ACTIONS, resources=[bucket.arn_for_objects(f"{results}*")]
            ),
        ]


def _workgroup(
    scope: Construct, id: str, *, name: str, description: str, cutoff: int, output_location: str
) -> athena.CfnWorkGroup:
    """A workgroup whose configuration is enforced: its results go to ``output_location``, encrypted, in a bucket of
    this account; a query scanning more than ``cutoff`` bytes is cancelled. Both of the stack's are built here."""
    return athena.CfnWorkGroup(
        scope,
        id,
        name=name,
        description=description,
        state="ENABLED",
        # Deleting the stack deletes the workgroup even if someone saved queries in it;
        # the results themselves are objects in the retained bucket, expired by its lifecycle.
        recursive_delete_option=True,
        work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
            enforce_work_group_configuration=True,
            bytes_scanned_cutoff_per_query=cutoff,
            publish_cloud_watch_metrics_enabled=True,
            requester_pays_enabled=False,
            engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version="AUTO"),
            result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                output_location=output_location,
                encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                    encryption_option="SSE_S3"
                ),
                # Athena refuses to write results if the bucket changed hands.
                expected_bucket_owner=Stack.of(scope).account,
            ),
        ),
    )

"""Where state lives: the run ledger, the records table, the bucket (runs, work, query results) and its access logs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import StackConfig
from sluice.adapters.aws.codec import EXPIRES, PK, SK
from sluice.domain.layout import ARCHIVE_PREFIX, RUNS_PREFIX, WORK_PREFIX


class Storage(Construct):
    """Both tables on demand with point-in-time recovery; the bucket encrypted, private, TLS-only, logged."""

    def __init__(self, scope: Construct, id: str, *, config: StackConfig) -> None:
        super().__init__(scope, id)
        # A run's URL entries matter while it is in flight and as the next run's catalog: they expire.
        self.ledger = self._table("Ledger", config.ledger_table, expires=EXPIRES)
        # Written only for specs with output.records_table: each record key's current record.
        self.records = self._table("RecordsTable", config.records_table)
        self.access_logs = self._bucket(
            "AccessLogs",
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(365))],
        )
        # Outputs and the raw archive they can be rebuilt from age alike; neither expires.
        aging = [
            s3.Transition(
                storage_class=s3.StorageClass.INFREQUENT_ACCESS, transition_after=Duration.days(config.outputs_ia_days)
            ),
            s3.Transition(
                storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                transition_after=Duration.days(config.outputs_glacier_ir_days),
            ),
        ]
        self.bucket = self._bucket(
            "Records",
            versioned=False,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="records/",
            lifecycle_rules=[
                # Parts and seed sets are working data: the finalizer copies what the output keeps.
                s3.LifecycleRule(
                    id="expire-work", prefix=WORK_PREFIX, expiration=Duration.days(config.work_retention_days)
                ),
                s3.LifecycleRule(id="age-run-outputs", prefix=RUNS_PREFIX, transitions=aging),
                # The responses of specs with output.archive: what `sluice reextract` rebuilds a run's records from.
                s3.LifecycleRule(id="age-archive", prefix=ARCHIVE_PREFIX, transitions=aging),
                # Athena's results (infra/query.py): a query's answer, read once; the records stay in runs/.
                s3.LifecycleRule(
                    id="expire-query-results",
                    prefix=config.query_results_prefix,
                    expiration=Duration.days(config.query_results_retention_days),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(2)
                ),
            ],
        )

    def _bucket(self, id: str, **settings: Any) -> s3.Bucket:
        """A bucket encrypted, private, TLS-only and kept when the stack goes, with its own ``settings``."""
        return s3.Bucket(
            self,
            id,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=RemovalPolicy.RETAIN,
            **settings,
        )

    def _table(self, id: str, name: str, *, expires: str | None = None) -> dynamodb.Table:
        """A table keyed as the codec keys every item (string ``pk`` and ``sk``), expiring items by ``expires``."""
        return dynamodb.Table(
            self,
            id,
            table_name=name,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=expires,
            removal_policy=RemovalPolicy.RETAIN,
            partition_key=dynamodb.Attribute(name=PK, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SK, type=dynamodb.AttributeType.STRING),
        )

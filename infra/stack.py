"""One deployable Sluice stack per stage, composed of small constructs."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.catalog import RecordsCatalog
from infra.config import StackConfig
from infra.egress import FixedEgress
from infra.functions import Functions
from infra.monitoring import Monitoring
from infra.query import Query
from infra.queues import Queues
from infra.storage import Storage
from sluice.spec import CrawlSpec


class SluiceStack(Stack):
    """Scheduler → queue → fetchers → tables and bucket → finalizer → metrics → alarms; the output queryable."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StackConfig,
        specs: list[CrawlSpec],
        alarm_email: str | None = None,
        **kwargs: object,
    ) -> None:
        # The stack's own tags (so the account's cost and resource views group it) and, through
        # Tags.of, every resource in the template that takes tags: with the explicitStackTags flag
        # the first no longer implies the second, and the template is what the tests can read.
        super().__init__(scope, id, tags=config.tags, **kwargs)  # type: ignore[arg-type]
        for key, value in config.tags.items():
            Tags.of(self).add(key, value)
        self.storage = Storage(self, "Storage", config=config)
        self.queues = Queues(self, "Queues", config=config)
        self.egress = FixedEgress(self, "Egress", config=config) if config.egress == "fixed" else None
        self.functions = Functions(
            self,
            "Functions",
            config=config,
            storage=self.storage,
            queues=self.queues,
            specs=specs,
            egress=self.egress,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            functions=self.functions,
            queues=self.queues,
            specs=specs,
            alarm_email=alarm_email,
        )
        self.catalog = RecordsCatalog(self, "Catalog", config=config, bucket=self.storage.bucket, specs=specs)
        self.query = Query(self, "Query", config=config, bucket=self.storage.bucket, catalog=self.catalog)
        self._outputs()

    def _outputs(self) -> None:
        """What the runbook and docs/querying.md name, as ``aws cloudformation describe-stacks`` shows it."""
        storage, queues, monitoring, query = self.storage, self.queues, self.monitoring, self.query
        dashboard = monitoring.dashboard.dashboard_name
        outputs = {
            "RecordsBucket": (storage.bucket.bucket_name, "Runs' records, summaries, seed files, query results"),
            "LedgerTable": (storage.ledger.table_name, "Runs, locks and every run's URLs"),
            "RecordsTable": (storage.records.table_name, "Each record key's current record (output.records_table)"),
            "FrontierQueue": (queues.frontier.queue_url, "The crawl queue (FIFO, a group per host)"),
            "FrontierQueueArn": (queues.frontier.queue_arn, "Where a dead-letter redrive sends messages"),
            "DeadLetterQueue": (queues.dead_letters.queue_url, "Messages that failed max_receive_count times"),
            "DeadLetterQueueArn": (queues.dead_letters.queue_arn, "The source of a dead-letter redrive"),
            "SchedulerFunction": (self.functions.scheduler.function_name, "Starts a run: sluice start NAME"),
            "AlarmTopic": (monitoring.topic.topic_arn, "Every alarm notifies this topic: subscribe to be paged"),
            "Dashboard": (dashboard, "Runs per crawl and the pipeline's health"),
            "DashboardUrl": (
                f"https://console.aws.amazon.com/cloudwatch/home?region={self.region}#dashboards:name={dashboard}",
                "The dashboard in the CloudWatch console",
            ),
            "GlueDatabase": (query.catalog.database.ref, "A table per crawl over its runs' records"),
            "QueryWorkgroup": (query.workgroup.ref, "The Athena workgroup to query the output in"),
            "QueryPolicy": (query.policy.managed_policy_arn, "Attach to whoever queries the output"),
            "ParquetCopyWorkgroup": (
                query.copy_workgroup.ref,
                "The Athena workgroup of the runs' Parquet copies (the finalizer's, not for queries)",
            ),
        }
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)
        if self.egress is not None:
            self.egress.outputs(self)

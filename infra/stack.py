"""One deployable Sluice stack per stage, composed of small constructs."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.catalog import RecordsCatalog
from infra.config import StackConfig
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
        self.functions = Functions(
            self, "Functions", config=config, storage=self.storage, queues=self.queues, specs=specs
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
        CfnOutput(self, "RecordsBucket", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "SchedulerFunction", value=self.functions.scheduler.function_name)
        CfnOutput(self, "DeadLetterQueue", value=self.queues.dead_letters.queue_url)
        CfnOutput(self, "AlarmTopic", value=self.monitoring.topic.topic_arn)

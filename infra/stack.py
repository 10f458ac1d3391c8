"""One deployable Sluice stack per stage, composed of small constructs."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.config import StackConfig
from infra.functions import Functions
from infra.monitoring import Monitoring
from infra.queues import Queues
from infra.storage import Storage
from sluice.spec import CrawlSpec


class SluiceStack(Stack):
    """Scheduler → queue → fetchers → tables and bucket → finalizer → metrics → alarms."""

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
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
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
        CfnOutput(self, "RecordsBucket", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "SchedulerFunction", value=self.functions.scheduler.function_name)
        CfnOutput(self, "DeadLetterQueue", value=self.queues.dead_letters.queue_url)
        CfnOutput(self, "AlarmTopic", value=self.monitoring.topic.topic_arn)

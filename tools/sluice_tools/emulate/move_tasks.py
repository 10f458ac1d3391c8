"""SQS's message move task (a dead-letter queue's redrive), played on moto, which has none (5.2.5).

:class:`MoveTasks` answers ``StartMessageMoveTask`` and ``ListMessageMoveTasks`` on one botocore
client the way SQS documents them: the task moves every message of the source queue to the
destination, keeping each message's group (the move happens at once, so the task lists as
``COMPLETED``). The messages move through moto's own receive, send and delete, so FIFO ordering
and group rules stay moto's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse

MAX_RECEIVES = 1_000
"""The stand-in moves at most 10,000 messages a task (every loop here is bounded)."""


def _answer(body: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("", 200, {}, None), body


@dataclass
class MoveTasks:
    """The move tasks started on one client, newest last."""

    sqs: Any
    tasks: list[dict[str, Any]] = field(default_factory=list)
    _asked: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def install(cls, sqs: Any) -> MoveTasks:
        tasks = cls(sqs)
        events = sqs.meta.events
        events.register("provide-client-params.sqs.StartMessageMoveTask", tasks._remember)
        events.register("before-call.sqs.StartMessageMoveTask", tasks._start)
        events.register("before-call.sqs.ListMessageMoveTasks", tasks._list)
        return tasks

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self._asked.append(dict(params))

    def _url(self, arn: str) -> str:
        url: str = self.sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]
        return url

    def _start(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        asked = self._asked.pop()
        source, destination = self._url(asked["SourceArn"]), self._url(asked["DestinationArn"])
        moved = 0
        for _round in range(MAX_RECEIVES):
            batch = self.sqs.receive_message(
                QueueUrl=source, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
            ).get("Messages", [])
            if not batch:
                break
            for message in batch:
                group = message.get("Attributes", {}).get("MessageGroupId")
                fifo = {"MessageGroupId": group, "MessageDeduplicationId": uuid.uuid4().hex} if group else {}
                self.sqs.send_message(QueueUrl=destination, MessageBody=message["Body"], **fifo)
                self.sqs.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
                moved += 1
        handle = f"moto-move-task-{len(self.tasks) + 1}"
        self.tasks.append(
            {
                "TaskHandle": handle,
                "Status": "COMPLETED",
                "SourceArn": asked["SourceArn"],
                "DestinationArn": asked["DestinationArn"],
                "ApproximateNumberOfMessagesMoved": moved,
                "ApproximateNumberOfMessagesToMove": moved,
            }
        )
        return _answer({"TaskHandle": handle})

    def _list(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return _answer({"Results": list(reversed(self.tasks))[:10]})

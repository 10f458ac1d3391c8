"""Finalize shard tasks on SQS, and the set of shards done per phase on the ledger table.

One standard queue feeds the finalizer (an event source mapping with MaximumConcurrency, a
redrive policy to a dead-letter queue after ``max_receive_count`` receives); a phase's tasks go
out 10 to a request. Completion is one conditional ``UpdateItem`` per task, adding the shard's
number to the phase's ``done`` set under the condition that it is not there yet: a task retried
after it counted loses the condition and adds nothing. The call that makes the set whole moves
the attempt on, and marks it ``moved``; a retry that finds the set whole but not moved (the task
that completed it died right after) moves it on itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from botocore.exceptions import ClientError

from sluice.adapters.aws import codec, keys
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors, code
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.errors import StoreError

_SEND_BATCH = 10
_ADD_DONE = f"ADD {codec.PHASE_DONE} :s SET {codec.EXPIRES} = :t"
"""The shard's number into the phase's set; the item expires with the table's TTL, as the run's URLs do."""
_NOT_DONE_YET = f"attribute_not_exists({codec.PHASE_DONE}) OR NOT contains({codec.PHASE_DONE}, :n)"


@aws_errors
class SqsShardTasks:
    def __init__(self, queue_url: str, table: str, *, ttl_days: int = 15, clock: Clock = SYSTEM_CLOCK) -> None:
        self.queue_url, self.table, self.ttl_s = queue_url, table, ttl_days * 86400
        self.clock = clock
        """The pipeline's time: a phase's done set expires ``ttl_days`` after its last shard."""

    def start(self, attempt: Mapping[str, object], phase: str) -> None:
        sqs = client("sqs")
        count = int(str(attempt["count"]))
        bodies = [json.dumps({**attempt, "phase": phase, "shard": shard}) for shard in range(count)]
        for start in range(0, len(bodies), _SEND_BATCH):
            entries = [
                {"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + _SEND_BATCH])
            ]
            answer = sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            if answer.get("Failed"):
                failed = "; ".join(f"{f['Id']}: {f.get('Message', f['Code'])}" for f in answer["Failed"])
                raise StoreError(f"finalize shard tasks not sent: {failed}")

    def done(self, attempt: Mapping[str, object], phase: str, shard: int, count: int) -> bool:
        db = client("dynamodb")
        key = to_item(keys.finalize_phase(str(attempt["run_id"]), str(attempt["attempt"]), phase))
        try:
            answer = db.update_item(
                TableName=self.table,
                Key=key,
                UpdateExpression=_ADD_DONE,
                ConditionExpression=_NOT_DONE_YET,
                ExpressionAttributeValues={
                    ":s": {"NS": [str(shard)]},
                    ":n": {"N": str(shard)},
                    ":t": {"N": str(int(self.clock()) + self.ttl_s)},
                },
                ReturnValues="ALL_NEW",
            )
            item = from_item(answer["Attributes"])
        except ClientError as exc:
            if code(exc) != "ConditionalCheckFailedException":
                raise
            # Counted before (a retry): move on only if the phase is whole and nobody has moved it on.
            stored = db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            item = from_item(stored) if stored else {}
            if item.get(codec.PHASE_MOVED):
                return False
        if len(item.get(codec.PHASE_DONE) or ()) < count:
            return False
        try:
            db.update_item(
                TableName=self.table,
                Key=key,
                UpdateExpression=f"SET {codec.PHASE_MOVED} = :t",
                ConditionExpression=f"attribute_not_exists({codec.PHASE_MOVED})",
                ExpressionAttributeValues={":t": {"BOOL": True}},
            )
        except ClientError as exc:
            if code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

"""Runs and crawl locks in the DynamoDB ledger table (key formats: ``keys.py``).

The run item changes a handful of times per run and never per page: no counter lives on it,
so it is never a hot item (see docs/architecture.md for the write rates of every item).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters.aws import codec, keys
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors, code
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.runs import RunInFlight, RunLock, RunState, deadline_bound, finished, iso

LOCK_FREE = f"attribute_not_exists({codec.PK}) OR {codec.DEADLINE} < :now"
"""The crawl lock may be taken: no run holds it, or its run is :func:`~sluice.domain.runs.overdue` (with
``:now`` = :func:`~sluice.domain.runs.deadline_bound`; tests/adapters/test_run_rules.py holds them to agree)."""


@aws_errors
class DynamoRunLedger:
    """:class:`sluice.ports.RunLedger` on one DynamoDB table."""

    def __init__(self, table: str, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.table = table
        self._db = client("dynamodb")
        self._clock = clock
        """The pipeline's time: runs open, are checked, finalize and finish by it (unless a caller says when)."""

    def open_run(
        self,
        crawl: str,
        spec_digest: str,
        deadline: timedelta,
        *,
        trigger: str | None,
        catalog_run: str | None,
        run_id: str | None = None,
        now: datetime | None = None,
    ) -> RunState:
        now = now or self._clock.now()
        state = RunState.opened(
            crawl, spec_digest, deadline, trigger=trigger, catalog_run=catalog_run, now=now, run_id=run_id
        )
        try:
            # Once per run: the lock and the run in one transaction, so neither exists without the other.
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(codec.lock_item(RunLock.of(state))),
                            # Taken if free, or if the holder is past its deadline (it will be finalized as
                            # unfinished): ``deadline < :now`` is the domain's ``overdue`` rule in DynamoDB's terms.
                            "ConditionExpression": LOCK_FREE,
                            "ExpressionAttributeValues": to_item({":now": deadline_bound(now)}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(codec.run_item(state)),
                            "ConditionExpression": f"attribute_not_exists({codec.PK})",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if code(exc) != "TransactionCanceledException":
                raise
            holder = self.active_run(crawl)
            if holder is None:
                raise RunInFlight(f"crawl {crawl!r}: could not take the run lock, try again") from exc
            raise RunInFlight.held_by(holder) from exc
        return state

    def get_run(self, crawl: str, run_id: str) -> RunState | None:
        item = self._db.get_item(TableName=self.table, Key=to_item(keys.run(crawl, run_id)), ConsistentRead=True)
        return codec.run_state(from_item(item["Item"])) if "Item" in item else None

    def active_run(self, crawl: str) -> RunLock | None:
        item = self._db.get_item(TableName=self.table, Key=to_item(keys.lock(crawl)), ConsistentRead=True)
        return codec.run_lock(from_item(item["Item"])) if "Item" in item else None

    def active_runs(self) -> list[RunLock]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues=to_item({":p": keys.LOCK_PK}),
            ConsistentRead=True,
        )
        return [codec.run_lock(from_item(i)) for page in pages for i in page["Items"]]

    def latest_finished(
        self, crawl: str, before_run_id: str | None = None, *, complete: bool = False
    ) -> RunState | None:
        condition = "pk = :p"
        values: dict[str, Any] = {":p": keys.runs_of(crawl)}
        if before_run_id is not None:
            condition += " AND sk < :s"
            values[":s"] = keys.run_sort_key(before_run_id)
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=to_item(values),
            ScanIndexForward=False,
            ConsistentRead=True,
            PaginationConfig={"PageSize": 20},
        )
        for page in pages:
            for item in page["Items"]:
                run = codec.run_state(from_item(item))
                if finished(run, complete=complete):
                    return run
        return None

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        """The crawl's last ``limit`` runs, newest first (one query: a crawl's runs share a partition)."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues=to_item({":p": keys.runs_of(crawl)}),
            ScanIndexForward=False,
            ConsistentRead=True,
            PaginationConfig={"MaxItems": limit, "PageSize": min(limit, 100)},
        )
        return [codec.run_state(from_item(item)) for page in pages for item in page["Items"]]

    def set_seeds(self, crawl: str, run_id: str, seeds: int) -> None:
        self._update(crawl, run_id, {"seeds": seeds})

    def fanned_out(self, crawl: str, run_id: str, offset: int) -> None:
        self._update(crawl, run_id, {"fanned_out": offset})

    def seeded(self, crawl: str, run_id: str) -> RunState | None:
        answer = self._update(crawl, run_id, {"seeding": False}, returns=True)
        return codec.run_state(from_item(answer)) if answer is not None else None

    def checked(self, crawl: str, run_id: str, done: int) -> None:
        self._update(crawl, run_id, {"checked_at": iso(self._clock.now()), "checked_done": done})

    def begin_finalizing(self, crawl: str, run_id: str) -> bool:
        changes = {"status": "finalizing", "finalizing_at": iso(self._clock.now())}
        return self._update(crawl, run_id, changes, when="running") is not None

    def finish(self, crawl: str, run_id: str, *, healthy: bool, complete: bool, records: int, summary_key: str) -> None:
        changes = {"status": "finished", "finished_at": iso(self._clock.now()), "healthy": healthy}
        expression, names, values = codec.run_update(
            changes | {"complete": complete, "records": records, "summary_key": summary_key}
        )
        self._db.update_item(
            TableName=self.table,
            Key=to_item(keys.run(crawl, run_id)),
            UpdateExpression=expression,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_item(values),
        )
        try:
            self._db.delete_item(
                TableName=self.table,
                Key=to_item(keys.lock(crawl)),
                ConditionExpression=f"{codec.RUN_ID} = :r",
                ExpressionAttributeValues=to_item({":r": run_id}),
            )
        except ClientError as exc:
            if code(exc) != "ConditionalCheckFailedException":
                raise

    def reextracted(self, crawl: str, run_id: str, *, spec_digest: str, healthy: bool, records: int) -> bool:
        changes = {"spec_digest": spec_digest, "healthy": healthy, "records": records}
        return self._update(crawl, run_id, changes, when="finished") is not None

    def _update(
        self,
        crawl: str,
        run_id: str,
        changes: Mapping[str, Any],
        *,
        when: str | None = None,
        returns: bool = False,
    ) -> dict[str, Any] | None:
        """One update of run fields (:func:`codec.run_update`) of an existing run item (whose status is ``when``,
        if given): the item as updated (empty unless ``returns``), or None (no change) if there is no such run or
        its status is another."""
        expression, names, values = codec.run_update(changes)
        condition = f"attribute_exists({codec.PK})"
        if when is not None:
            condition = f"#{codec.RUN_STATUS} = :when"
            names[f"#{codec.RUN_STATUS}"] = codec.RUN_STATUS
            values[":when"] = when
        try:
            answer = self._db.update_item(
                TableName=self.table,
                Key=to_item(keys.run(crawl, run_id)),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_item(values),
                ReturnValues="ALL_NEW" if returns else "NONE",
            )
        except ClientError as exc:
            if code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        attributes: dict[str, Any] = answer.get("Attributes", {})
        return attributes

"""Runs and crawl locks in the DynamoDB ledger table (key formats: ``keys.py``).

The run item changes a handful of times per run and never per page: no counter lives on it,
so it is never a hot item (see docs/architecture.md for the write rates of every item).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters.aws import keys
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.runs import RunInFlight, RunLock, RunState, deadline_bound, finished, iso

LOCK_FREE = "attribute_not_exists(pk) OR deadline < :now"
"""The crawl lock may be taken: no run holds it, or its run is :func:`~sluice.domain.runs.overdue` (with
``:now`` = :func:`~sluice.domain.runs.deadline_bound`; tests/adapters/test_run_rules.py holds them to agree)."""


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


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
        lock = RunLock.of(state)
        lock_item = {
            **keys.lock(crawl),
            "run_id": lock.run_id,
            "started_at": lock.started_at,
            "deadline": lock.deadline,
            **({"trigger": lock.trigger} if lock.trigger else {}),
        }
        try:
            # Once per run: the lock and the run in one transaction, so neither exists without the other.
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(lock_item),
                            # Taken if free, or if the holder is past its deadline (it will be finalized as
                            # unfinished): ``deadline < :now`` is the domain's ``overdue`` rule in DynamoDB's terms.
                            "ConditionExpression": LOCK_FREE,
                            "ExpressionAttributeValues": to_item({":now": deadline_bound(now)}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(_run_item(state)),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
                raise
            holder = self.active_run(crawl)
            if holder is None:
                raise RunInFlight(f"crawl {crawl!r}: could not take the run lock, try again") from exc
            raise RunInFlight.held_by(holder) from exc
        return state

    def get_run(self, crawl: str, run_id: str) -> RunState | None:
        item = self._db.get_item(TableName=self.table, Key=to_item(keys.run(crawl, run_id)), ConsistentRead=True)
        return _state(from_item(item["Item"])) if "Item" in item else None

    def active_run(self, crawl: str) -> RunLock | None:
        item = self._db.get_item(TableName=self.table, Key=to_item(keys.lock(crawl)), ConsistentRead=True)
        return _lock(from_item(item["Item"])) if "Item" in item else None

    def active_runs(self) -> list[RunLock]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues=to_item({":p": keys.LOCK_PK}),
            ConsistentRead=True,
        )
        return [_lock(from_item(i)) for page in pages for i in page["Items"]]

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
                run = _state(from_item(item))
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
        return [_state(from_item(item)) for page in pages for item in page["Items"]]

    def set_seeds(self, crawl: str, run_id: str, seeds: int) -> None:
        self._update(crawl, run_id, "SET seeds = :n", {":n": seeds})

    def fanned_out(self, crawl: str, run_id: str, offset: int) -> None:
        self._update(crawl, run_id, "SET fanned_out = :n", {":n": offset})

    def seeded(self, crawl: str, run_id: str) -> RunState | None:
        answer = self._update(crawl, run_id, "SET seeding = :f", {":f": False}, returns=True)
        return _state(from_item(answer)) if answer is not None else None

    def checked(self, crawl: str, run_id: str, done: int) -> None:
        self._update(
            crawl, run_id, "SET checked_at = :t, checked_done = :d", {":t": iso(self._clock.now()), ":d": done}
        )

    def begin_finalizing(self, crawl: str, run_id: str) -> bool:
        values = {":f": "finalizing", ":t": iso(self._clock.now())}
        return self._update(crawl, run_id, "SET #s = :f, finalizing_at = :t", values, when="running") is not None

    def finish(self, crawl: str, run_id: str, *, healthy: bool, complete: bool, records: int, summary_key: str) -> None:
        values = {":done": "finished", ":now": iso(self._clock.now()), ":h": healthy, ":c": complete}
        self._db.update_item(
            TableName=self.table,
            Key=to_item(keys.run(crawl, run_id)),
            UpdateExpression=(
                "SET #s = :done, finished_at = :now, healthy = :h, complete = :c, records = :n, summary_key = :k"
            ),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=to_item(values | {":n": records, ":k": summary_key}),
        )
        try:
            self._db.delete_item(
                TableName=self.table,
                Key=to_item(keys.lock(crawl)),
                ConditionExpression="run_id = :r",
                ExpressionAttributeValues=to_item({":r": run_id}),
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def reextracted(self, crawl: str, run_id: str, *, spec_digest: str, healthy: bool, records: int) -> bool:
        values = {":d": spec_digest, ":h": healthy, ":n": records}
        expression = "SET spec_digest = :d, healthy = :h, records = :n"
        return self._update(crawl, run_id, expression, values, when="finished") is not None

    def _update(
        self,
        crawl: str,
        run_id: str,
        expression: str,
        values: Mapping[str, Any],
        *,
        when: str | None = None,
        returns: bool = False,
    ) -> dict[str, Any] | None:
        """One update of an existing run item (whose status is ``when``, if given): the item as updated (empty
        unless ``returns``), or None (no change) if there is no such run or its status is another."""
        condition: dict[str, Any] = {"ConditionExpression": "attribute_exists(pk)"}
        if when is not None:
            condition = {"ConditionExpression": "#s = :when", "ExpressionAttributeNames": {"#s": "status"}}
            values = {**values, ":when": when}
        try:
            answer = self._db.update_item(
                TableName=self.table,
                Key=to_item(keys.run(crawl, run_id)),
                UpdateExpression=expression,
                ExpressionAttributeValues=to_item(values),
                ReturnValues="ALL_NEW" if returns else "NONE",
                **condition,
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        attributes: dict[str, Any] = answer.get("Attributes", {})
        return attributes


def _run_item(state: RunState) -> dict[str, Any]:
    item: dict[str, Any] = {
        **keys.run(state.crawl, state.run_id),
        "crawl": state.crawl,
        "run_id": state.run_id,
        "status": state.status,
        "started_at": state.started_at,
        "deadline": state.deadline,
        "spec_digest": state.spec_digest,
        "seeding": state.seeding,
        "seeds": state.seeds,
    }
    optional = {"catalog_run": state.catalog_run, "trigger": state.trigger}
    return item | {k: v for k, v in optional.items() if v is not None}


def _state(item: Mapping[str, Any]) -> RunState:
    return RunState(
        crawl=item["crawl"],
        run_id=item["run_id"],
        status=item["status"],
        started_at=item["started_at"],
        deadline=item["deadline"],
        spec_digest=item["spec_digest"],
        seeding=bool(item.get("seeding", False)),
        seeds=int(item.get("seeds", 0)),
        fanned_out=int(item.get("fanned_out", 0)),
        catalog_run=item.get("catalog_run"),
        trigger=item.get("trigger"),
        checked_at=item.get("checked_at"),
        checked_done=int(item["checked_done"]) if item.get("checked_done") is not None else None,
        finalizing_at=item.get("finalizing_at"),
        finished_at=item.get("finished_at"),
        healthy=item.get("healthy"),
        complete=item.get("complete"),
        records=int(item["records"]) if item.get("records") is not None else None,
        summary_key=item.get("summary_key"),
    )


def _lock(item: Mapping[str, Any]) -> RunLock:
    return RunLock(
        crawl=item["sk"],
        run_id=item["run_id"],
        started_at=item["started_at"],
        deadline=item["deadline"],
        trigger=item.get("trigger"),
    )

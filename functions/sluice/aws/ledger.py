"""The run ledger in DynamoDB: runs and their counters, the one-run-at-a-time lock, and URL claims.

Layout of the ledger table (``pk``, ``sk``):

- ``crawl#NAME`` / ``run#RUN_ID``: a run, with its counters;
- ``active`` / ``NAME``: the lock that says a crawl has a run in flight;
- ``claims#RUN_ID`` / ``URL_HASH``: a URL claimed for a run (TTL), so it is enqueued once and counted once.

Exactly-once counting rests on two transactions: claiming new URLs adds to ``enqueued`` in the
same transaction that creates their claims, and completing a URL adds to ``done`` (and the
outcome counters) in the same transaction that flips its claim to done. A redelivered message
finds its claim done and changes nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from secrets import randbelow
from typing import Any, Literal

from botocore.exceptions import ClientError

from sluice.aws.clients import client
from sluice.aws.items import from_item, to_item
from sluice.messages import UrlTask

Outcome = Literal["fetched", "not_modified", "failed", "skipped"]
COUNTERS = (
    "enqueued",
    "done",
    "fetched",
    "not_modified",
    "failed",
    "skipped",
    "records_new",
    "records_changed",
    "records_unchanged",
    "items",
)
TALLIES = ("missing", "rejected", "failures", "skips")
"""Per-run maps counted by key: missing and rejected by field, failures and skips by reason."""
_TRANSACT_MAX = 100


class RunInFlight(Exception):
    """A crawl already has a run in flight; a second one is refused (the message says which and since when)."""


def url_hash(url: str) -> str:
    """A fixed-length key for a URL (DynamoDB sort keys stop at 1,024 bytes; URLs don't)."""
    return hashlib.sha256(url.encode()).hexdigest()[:40]


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by start time, unique by a random suffix: ``20261129T210000Z-3e72c1``.

    The suffix starts with the millisecond (three hex digits), so two runs started within one
    second still sort in start order and a quick re-run finds the run before it; three random
    hex digits follow.
    """
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{now.microsecond // 1000:03x}{randbelow(16**3):03x}"


@dataclass(frozen=True, slots=True)
class PageCounts:
    """What one URL contributed to its run."""

    outcome: Outcome
    reason: str | None = None
    records_new: int = 0
    records_changed: int = 0
    records_unchanged: int = 0
    items: int = 0
    missing: Mapping[str, int] = field(default_factory=dict)
    rejected: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunState:
    """A run as the ledger holds it."""

    crawl: str
    run_id: str
    status: str
    started_at: str
    deadline: str
    spec_digest: str
    counters: Mapping[str, int]
    missing: Mapping[str, int]
    failures: Mapping[str, int]
    rejected: Mapping[str, int] = field(default_factory=dict)
    skips: Mapping[str, int] = field(default_factory=dict)
    finished_at: str | None = None
    healthy: bool | None = None
    seeding: bool = False
    """The scheduler is still fanning the seeds out (possibly over several invocations)."""

    @property
    def pending(self) -> int:
        return self.counters.get("enqueued", 0) - self.counters.get("done", 0)

    @property
    def drained(self) -> bool:
        """Every seed is enqueued and every URL enqueued is done: nothing more will happen in this run."""
        return not self.seeding and self.pending <= 0

    @property
    def records(self) -> int:
        c = self.counters
        return c.get("records_new", 0) + c.get("records_changed", 0) + c.get("records_unchanged", 0)

    @property
    def overdue(self) -> bool:
        return datetime.fromisoformat(self.deadline) < datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


class RunLedger:
    """Runs, locks and claims in one DynamoDB table."""

    def __init__(self, table: str, *, claim_ttl_days: int = 30) -> None:
        self.table = table
        self._ttl = claim_ttl_days * 86400
        self._db = client("dynamodb")

    # -- runs ---------------------------------------------------------------------------------

    def open_run(
        self, crawl: str, spec_digest: str, deadline: timedelta, run_id: str | None = None, trigger: str | None = None
    ) -> RunState:
        """Open a run and take the crawl's lock; raise RunInFlight if another run holds it and is not overdue."""
        now = datetime.now(UTC)
        run_id = run_id or new_run_id(now)
        run = {
            "pk": f"crawl#{crawl}",
            "sk": f"run#{run_id}",
            "crawl": crawl,
            "run_id": run_id,
            "status": "running",
            "started_at": _iso(now),
            "deadline": _iso(now + deadline),
            "spec_digest": spec_digest,
            **{tally: {} for tally in TALLIES},
            "seeding": True,
            **({"trigger": trigger} if trigger else {}),
            **dict.fromkeys(COUNTERS, 0),
        }
        lock = {
            "pk": "active",
            "sk": crawl,
            "run_id": run_id,
            "started_at": run["started_at"],
            "deadline": run["deadline"],
            **({"trigger": trigger} if trigger else {}),
        }
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(lock),
                            # Taken if free, or if the holder is past its deadline (it will be finalized as unfinished).
                            "ConditionExpression": "attribute_not_exists(pk) OR deadline < :now",
                            "ExpressionAttributeValues": to_item({":now": _iso(now)}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": to_item(run),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            holder = self.active_run(crawl)
            if holder is None:
                raise RunInFlight(f"crawl {crawl!r}: could not take the run lock, try again") from exc
            raise RunInFlight(
                f"crawl {crawl!r} already has run {holder['run_id']} in flight since {holder['started_at']} "
                f"(deadline {holder['deadline']}); a second run is refused until it finishes or passes its deadline"
            ) from exc
        return self._state(run)

    def active_run(self, crawl: str) -> dict[str, Any] | None:
        """The lock item of a crawl's run in flight, if any."""
        item = self._db.get_item(TableName=self.table, Key=to_item({"pk": "active", "sk": crawl}), ConsistentRead=True)
        return from_item(item["Item"]) if "Item" in item else None

    def active_runs(self) -> list[dict[str, Any]]:
        """Every crawl's lock: the runs a sweep looks at."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues=to_item({":p": "active"}),
            ConsistentRead=True,
        )
        return [from_item(i) for page in pages for i in page["Items"]]

    def get_run(self, crawl: str, run_id: str) -> RunState | None:
        key = {"pk": f"crawl#{crawl}", "sk": f"run#{run_id}"}
        item = self._db.get_item(TableName=self.table, Key=to_item(key), ConsistentRead=True)
        return self._state(from_item(item["Item"])) if "Item" in item else None

    def previous_finished(self, crawl: str, before_run_id: str) -> RunState | None:
        """The latest finished run of ``crawl`` that started before ``before_run_id``."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p AND sk < :s",
            ExpressionAttributeValues=to_item({":p": f"crawl#{crawl}", ":s": f"run#{before_run_id}"}),
            ScanIndexForward=False,
            ConsistentRead=True,
            PaginationConfig={"PageSize": 20},
        )
        for page in pages:
            for item in page["Items"]:
                run = self._state(from_item(item))
                if run.status == "finished":
                    return run
        return None

    def begin_finalizing(self, crawl: str, run_id: str) -> bool:
        """Move a running run to finalizing; False if someone else already did (finalizing is once)."""
        try:
            self._db.update_item(
                TableName=self.table,
                Key=to_item({"pk": f"crawl#{crawl}", "sk": f"run#{run_id}"}),
                UpdateExpression="SET #s = :f",
                ConditionExpression="#s = :r",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_item({":f": "finalizing", ":r": "running"}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def finish(self, crawl: str, run_id: str, *, healthy: bool, summary_key: str) -> None:
        """Record the verdict and release the crawl's lock (only if this run still holds it)."""
        now = _iso(datetime.now(UTC))
        self._db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": to_item({"pk": f"crawl#{crawl}", "sk": f"run#{run_id}"}),
                        "UpdateExpression": "SET #s = :done, finished_at = :now, healthy = :h, summary_key = :k",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": to_item(
                            {":done": "finished", ":now": now, ":h": healthy, ":k": summary_key}
                        ),
                    }
                },
            ]
        )
        try:
            self._db.delete_item(
                TableName=self.table,
                Key=to_item({"pk": "active", "sk": crawl}),
                ConditionExpression="run_id = :r",
                ExpressionAttributeValues=to_item({":r": run_id}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def seeded(self, crawl: str, run_id: str) -> RunState | None:
        """Mark a run's fan-out complete; return the run as it then stands (None if there is no such run)."""
        try:
            answer = self._db.update_item(
                TableName=self.table,
                Key=to_item({"pk": f"crawl#{crawl}", "sk": f"run#{run_id}"}),
                UpdateExpression="SET seeding = :f",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=to_item({":f": False}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return self._state(from_item(answer["Attributes"]))

    # -- claims -------------------------------------------------------------------------------

    def claim(
        self, crawl: str, run_id: str, tasks: Sequence[UrlTask], *, max_pages: int | None = None
    ) -> list[UrlTask]:
        """Claim URLs for a run; return those newly claimed (to enqueue). ``enqueued`` grows by exactly that many.

        With ``max_pages``, the run's ``enqueued`` never passes it: the counter's own condition
        enforces the cap, so concurrent fetchers cannot overshoot it together.
        """
        claimed: list[UrlTask] = []
        unique = list({url_hash(t.url): t for t in tasks}.items())
        for start in range(0, len(unique), _TRANSACT_MAX - 1):
            chunk = unique[start : start + _TRANSACT_MAX - 1]
            got, capped = self._claim_chunk(crawl, run_id, chunk, max_pages)
            claimed.extend(got)
            if capped:
                break
        return claimed

    def _claim_chunk(
        self, crawl: str, run_id: str, chunk: list[tuple[str, UrlTask]], max_pages: int | None
    ) -> tuple[list[UrlTask], bool]:
        """Claim one transaction's worth; return the tasks claimed, and whether the run reached ``max_pages``."""
        expires = int(time.time()) + self._ttl
        for _ in range(2 * len(chunk) + 2):  # each round drops at least one claim or shrinks to the cap
            if not chunk:
                return [], False
            items: list[dict[str, Any]] = [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": to_item(
                            {
                                "pk": f"claims#{run_id}",
                                "sk": digest,
                                "url": task.url,
                                "depth": task.depth,
                                "parent": task.parent or "",
                                "status": "queued",
                                "expires_at": expires,
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
                for digest, task in chunk
            ]
            limit = None if max_pages is None else max_pages - len(chunk)
            items.append(self._counter_update(crawl, run_id, {"enqueued": len(chunk)}, enqueued_at_most=limit))
            try:
                self._db.transact_write_items(TransactItems=items)
            except ClientError as exc:
                taken = _conditional_failures(exc)
                if len(chunk) in taken:
                    run = self.get_run(crawl, run_id)
                    if run is None or run.status != "running":
                        raise RunClosed(f"run {run_id} is no longer running: links not enqueued") from exc
                    room = 0 if max_pages is None else max_pages - run.counters["enqueued"]
                    if room <= 0:
                        return [], True
                    chunk = chunk[:room]
                    continue
                if not taken:
                    raise
                chunk = [pair for i, pair in enumerate(chunk) if i not in taken]
                continue
            return [task for _, task in chunk], False
        raise AssertionError("unreachable: every round shrinks the chunk")

    def claims(self, run_id: str, urls: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The claims of ``urls`` in a run, by URL (missing ones absent)."""
        keys = [to_item({"pk": f"claims#{run_id}", "sk": url_hash(u)}) for u in dict.fromkeys(urls)]
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), 100):
            request = {self.table: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
            for _ in range(10):
                answer = self._db.batch_get_item(RequestItems=request)
                for item in answer["Responses"].get(self.table, []):
                    claim = from_item(item)
                    found[claim["url"]] = claim
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
        return found

    def complete(self, crawl: str, run_id: str, url: str, counts: PageCounts) -> bool:
        """Count a URL's outcome once: True if this call counted it, False if it was already done."""
        counters: dict[str, int] = {"done": 1, counts.outcome: 1}
        for name in ("records_new", "records_changed", "records_unchanged", "items"):
            if value := getattr(counts, name):
                counters[name] = value
        claim = {
            "Update": {
                "TableName": self.table,
                "Key": to_item({"pk": f"claims#{run_id}", "sk": url_hash(url)}),
                "UpdateExpression": "SET #s = :done, outcome = :o",
                "ConditionExpression": "attribute_exists(pk) AND #s <> :done",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": to_item({":done": "done", ":o": counts.outcome}),
            }
        }
        reasons = {counts.reason: 1} if counts.reason else {}
        tallies = {
            "missing": counts.missing,
            "rejected": counts.rejected,
            "failures": reasons if counts.outcome == "failed" else {},
            "skips": reasons if counts.outcome == "skipped" else {},
        }
        update = self._counter_update(crawl, run_id, counters, tallies=tallies)
        try:
            self._db.transact_write_items(TransactItems=[claim, update])
        except ClientError as exc:
            failed = _conditional_failures(exc)
            if 0 in failed:
                return False
            if 1 in failed:
                raise RunClosed(f"run {run_id} is no longer running: {url} not counted") from exc
            raise
        return True

    def _counter_update(
        self,
        crawl: str,
        run_id: str,
        counters: Mapping[str, int],
        *,
        tallies: Mapping[str, Mapping[str, int]] | None = None,
        enqueued_at_most: int | None = None,
    ) -> dict[str, Any]:
        """The run item's ADDs: ``counters`` at top level, each of ``tallies`` into its map by key."""
        names: dict[str, str] = {"#s": "status"}
        values: dict[str, Any] = {":running": "running"}
        adds: list[str] = []
        for i, (name, value) in enumerate(counters.items()):
            names[f"#c{i}"] = name
            values[f":c{i}"] = value
            adds.append(f"#c{i} :c{i}")
        for m, (tally, mapping) in enumerate((tallies or {}).items()):
            nonzero = {key: value for key, value in mapping.items() if value}
            if not nonzero:
                continue
            names[f"#m{m}"] = tally  # names, not words: "missing" and "failures" are DynamoDB reserved words
            for i, (key, value) in enumerate(nonzero.items()):
                names[f"#m{m}k{i}"] = key
                values[f":m{m}v{i}"] = value
                adds.append(f"#m{m}.#m{m}k{i} :m{m}v{i}")
        condition = "#s = :running"
        if enqueued_at_most is not None:
            condition += " AND enqueued <= :cap"
            values[":cap"] = enqueued_at_most
        return {
            "Update": {
                "TableName": self.table,
                "Key": to_item({"pk": f"crawl#{crawl}", "sk": f"run#{run_id}"}),
                "UpdateExpression": "ADD " + ", ".join(adds),
                # Counting into a run that is already finalizing would change a verdict already given.
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_item(values),
            }
        }

    @staticmethod
    def _state(item: Mapping[str, Any]) -> RunState:
        return RunState(
            crawl=item["crawl"],
            run_id=item["run_id"],
            status=item["status"],
            started_at=item["started_at"],
            deadline=item["deadline"],
            spec_digest=item["spec_digest"],
            counters={name: int(item.get(name, 0)) for name in COUNTERS},
            missing={k: int(v) for k, v in item.get("missing", {}).items()},
            failures={k: int(v) for k, v in item.get("failures", {}).items()},
            rejected={k: int(v) for k, v in item.get("rejected", {}).items()},
            skips={k: int(v) for k, v in item.get("skips", {}).items()},
            finished_at=item.get("finished_at"),
            healthy=item.get("healthy"),
            seeding=bool(item.get("seeding", False)),
        )


class RunClosed(Exception):
    """A URL finished after its run was finalized; its outcome is no longer counted."""


def _conditional_failures(exc: ClientError) -> set[int]:
    """Indexes of the transaction's items whose condition failed."""
    reasons = exc.response.get("CancellationReasons") or []
    return {i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"}

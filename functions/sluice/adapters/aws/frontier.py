"""A run's URLs in the DynamoDB ledger table: link claims, each URL's counting write, progress shards.

Every write here is a single-item write: no transaction, so nothing on the per-page path can
be cancelled by ``TransactionConflict``, and no item is written by every page. A URL item takes
one write when a link is claimed and one when its result is written (a seed only the second);
duplicates that lose a condition cost one write each, which is why links are deduplicated
before they get here.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters.aws import codec, keys
from sluice.adapters.aws.batch import batch_get
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors, code
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.pages import PageResult, UrlEntry, url_hash
from sluice.domain.runs import PROGRESS_SHARDS, Progress, claim_room
from sluice.domain.shards import Shard
from sluice.messages import UrlTask
from sluice.ports import Claims

_NEW_OR_CLAIMED = f"attribute_not_exists({codec.PK}) OR #s = :q"


@aws_errors
class DynamoFrontier:
    """:class:`sluice.ports.Frontier` on the ledger table."""

    def __init__(self, table: str, *, ttl_days: int, writers: int = 16, clock: Clock = SYSTEM_CLOCK) -> None:
        self.table = table
        self._ttl_s = ttl_days * 86400
        self._clock = clock
        """The pipeline's time: a URL item expires ``ttl_days`` after its last write by it."""
        self._db = client("dynamodb")
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="frontier")
        self._rng = random.Random()  # noqa: S311 - spreads writes over shards, nothing secret

    def entries(self, run_id: str, url_hashes: Sequence[str]) -> dict[str, UrlEntry]:
        # Eventually consistent (half the price): a URL missed here is fetched again and its write loses.
        found = batch_get(
            self._db, self.table, [to_item(keys.url(run_id, h)) for h in dict.fromkeys(url_hashes)], consistent=False
        )
        return {entry.url_hash: entry for entry in map(_entry, found)}

    def by_prefix(self, run_id: str, prefixes: Sequence[str]) -> dict[str, UrlEntry]:
        # One Query a prefix, in the URL's partition: strongly consistent (1 read unit for a result under 4 KB),
        # so a result written by a batch that ended before this one began is seen.
        def one(prefix: str) -> UrlEntry | None:
            answer = self._db.query(
                TableName=self.table,
                KeyConditionExpression="pk = :p AND begins_with(sk, :h)",
                ExpressionAttributeValues=to_item({":p": keys.url_partition(run_id, int(prefix[0], 16)), ":h": prefix}),
                ConsistentRead=True,
            )
            done = [e for e in map(_entry, answer.get("Items", [])) if e.done]
            return done[0] if done else None

        unique = list(dict.fromkeys(prefixes))
        return {p: e for p, e in zip(unique, self._pool.map(one, unique), strict=True) if e is not None}

    def claim(self, run_id: str, tasks: Sequence[UrlTask], *, seeds: int, max_pages: int) -> Claims:
        # The cap is checked against the progress hint: concurrent fetchers can pass it by one batch's links each.
        room = claim_room(max_pages, seeds, self.progress(run_id).claimed)
        tasks, capped = list(tasks[:room]), list(tasks[room:])
        expires = self._expires()
        won = self._pool.map(lambda t: self._claim_one(run_id, t, expires), tasks)
        return Claims([task for task, ok in zip(tasks, won, strict=True) if ok], capped)

    def _claim_one(self, run_id: str, task: UrlTask, expires: int) -> bool:
        item = codec.claim_item(run_id, url_hash(task.url), task, expires)
        return self._put_if(item, f"attribute_not_exists({codec.PK})", {})

    def complete(self, run_id: str, results: Sequence[PageResult]) -> list[bool]:
        expires = self._expires()

        def write(result: PageResult) -> bool:
            item = codec.result_item(run_id, url_hash(result.url), result, expires)
            # Counted once: a seed's first result creates its item; a link's replaces its claim.
            return self._put_if(item, _NEW_OR_CLAIMED, {":q": codec.QUEUED}, names={"#s": codec.STATE})

        return list(self._pool.map(write, results))

    def replace(self, run_id: str, results: Sequence[PageResult]) -> int:
        expires = self._expires()

        def write(result: PageResult) -> bool:
            item = codec.result_item(run_id, url_hash(result.url), result, expires)
            return self._put_if(item, "#s = :d", {":d": codec.DONE}, names={"#s": codec.STATE})

        return sum(self._pool.map(write, results))

    def _expires(self) -> int:
        """The TTL attribute of an item written now (epoch seconds)."""
        return int(self._clock()) + self._ttl_s

    def _put_if(
        self, item: dict[str, Any], condition: str, values: dict[str, Any], names: dict[str, str] | None = None
    ) -> bool:
        request: dict[str, Any] = {"TableName": self.table, "Item": to_item(item), "ConditionExpression": condition}
        if values:
            request["ExpressionAttributeValues"] = to_item(values)
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            self._db.put_item(**request)
        except ClientError as exc:
            if code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def scan(self, run_id: str, *, consistent: bool = True, shard: Shard | None = None) -> Iterator[UrlEntry]:
        paginator = self._db.get_paginator("query")
        # Partition H holds hashes starting with H: hash order. A shard is a sort-key range of one partition
        # (of a few, for a run of fewer than 16 shards).
        for partition, first, last in (shard or Shard(0, 1)).partitions():
            pages = paginator.paginate(
                TableName=self.table,
                KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                ExpressionAttributeValues=to_item(
                    {":p": keys.url_partition(run_id, partition), ":a": first, ":b": last}
                ),
                ConsistentRead=consistent,
            )
            for page in pages:
                yield from map(_entry, page["Items"])

    def add_progress(self, run_id: str, delta: Progress) -> None:
        expression, values = codec.progress_add(delta)
        self._db.update_item(
            TableName=self.table,
            Key=to_item(keys.progress(run_id, self._rng.randrange(PROGRESS_SHARDS))),
            UpdateExpression=expression,
            ExpressionAttributeValues=to_item(values),
        )

    def scan_sized(self, run_id: str, *, shard: Shard | None = None) -> Iterator[tuple[UrlEntry, int]]:
        """The same queries as :meth:`scan`: each entry sized from its result, as :meth:`stored_bytes` does."""
        for entry in self.scan(run_id, shard=shard):
            yield entry, codec.stored_bytes(run_id, entry)

    def held_digests(self, run_id: str, *, shard: Shard | None = None) -> Iterator[bytes]:
        """The same queries as :meth:`scan` (eventually consistent): each entry's digests, if it held records."""
        for entry in self.scan(run_id, consistent=False, shard=shard):
            result = entry.result
            if result is not None and result.holds_records and result.records:
                yield result.digests

    def stored_bytes(self, run_id: str, entry: UrlEntry) -> int:
        return codec.stored_bytes(run_id, entry)

    def progress(self, run_id: str) -> Progress:
        shards = [to_item(keys.progress(run_id, n)) for n in range(PROGRESS_SHARDS)]
        total = Progress()
        for raw in batch_get(self._db, self.table, shards, consistent=False):
            total += codec.progress_of(from_item(raw))
        return total


def _entry(raw: dict[str, Any]) -> UrlEntry:
    return codec.url_entry(from_item(raw))

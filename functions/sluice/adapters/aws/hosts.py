"""What the fleet knows of each target host, one small item per host in the ledger table.

Read once per batch that holds the host (one strongly consistent ``BatchGetItem`` for the batch's
hosts), written at most once per such batch and only when it says something (a pause, spacing
still running, a throttled target, a breaker count): a host's item is written no faster than
the fleet asks the host for pages, by one writer at a time (its queue group's holder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from botocore.exceptions import ClientError

from sluice.adapters.aws import codec, keys
from sluice.adapters.aws.batch import batch_get
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors, code
from sluice.adapters.aws.items import from_item, to_item
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.hosts import HostState
from sluice.observability import logger


@aws_errors
class DynamoHostBook:
    """:class:`sluice.ports.HostBook` on the ledger table."""

    def __init__(self, table: str, *, ttl_days: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.table = table
        self._ttl_s = ttl_days * 86400
        self._clock = clock
        """The pipeline's time: a host's item expires ``ttl_days`` after its last write."""
        self._db = client("dynamodb")

    def load(self, hosts: Sequence[str]) -> dict[str, HostState]:
        if not hosts:
            return {}
        wanted = [to_item(keys.host(h)) for h in dict.fromkeys(hosts)]
        found = {}
        for raw in batch_get(self._db, self.table, wanted, consistent=True):
            state = codec.host_state(from_item(raw))
            found[state.host] = state
        return found

    def save(self, states: Sequence[HostState]) -> int:
        written = 0
        expires = int(self._clock()) + self._ttl_s
        for state in states:
            fresh = replace(state, version=state.version + 1)
            condition = f"attribute_not_exists({codec.PK})" if state.version == 0 else f"{codec.HOST_VERSION} = :v"
            try:
                self._db.put_item(
                    TableName=self.table,
                    Item=to_item(codec.host_item(fresh, expires)),
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": to_item({":v": state.version})} if state.version else {}),
                )
                written += 1
            except ClientError as exc:
                if code(exc) != "ConditionalCheckFailedException":
                    raise
                # Another fetcher held the host meanwhile (a batch outlived its visibility): its state stands.
                logger.warning("host state changed under us: not written", extra={"host": state.host})
        return written

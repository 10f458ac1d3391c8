"""AWS's limits that moto does not enforce, enforced on moto, scaled down so a test can reach them.

- **SQS FIFO's head window and in-flight quota.** SQS scans the first 120,000 messages of a FIFO
  queue for groups it can deliver, and holds at most 120,000 in flight; past the quota a receive
  returns no error, only no messages (the SQS developer guide, "Avoid large message backlogs with the
  same message group ID", and its FIFO quotas). moto scans every message and has no quota.
- **DynamoDB's throughput per partition**: about 1,000 write and 3,000 read units a second. A
  table's items are placed on partitions by the hash of their partition key; a request that would
  take a partition past its units in the current second is answered ``ProvisionedThroughputExceededException``
  (or ``ThrottlingException``, as an on-demand table past its limit answers), HTTP 400.
- **S3's request rate per prefix**: 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD a second; past it
  S3 answers ``503 SlowDown``. A key's prefix here is everything up to its last ``/``.

The DynamoDB and S3 answers are made where moto answers, at the HTTP boundary (its botocore
stubber), so each attempt of a call is judged alone and botocore's retry mode sees exactly what
it would see from AWS: the clients' retries (``adapters/aws/clients.py``: adaptive, 8 attempts)
and SQS redelivery are what must absorb them. Switched on per test with :func:`enforced`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from moto.core.botocore_stubber import BotocoreStubber
from moto.sqs import models as sqs_models

from sluice_tools.meter.dynamo_requests import item_reads, item_writes
from sluice_tools.meter.moto_tables import MotoTables

DynamoError = Literal["ProvisionedThroughputExceededException", "ThrottlingException"]
_DYNAMO_TYPES = {
    "ProvisionedThroughputExceededException": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
    "ThrottlingException": "com.amazon.coral.availability#ThrottlingException",
}
_S3_WRITES = frozenset({"PUT", "POST", "DELETE"})
_KEY_SPACE = 1 << 128


@dataclass(frozen=True)
class Limits:
    """What to enforce (None: as moto, unenforced). AWS's own figures in the comments; tests scale them down."""

    fifo_window: int | None = None
    """Messages a FIFO receive looks at for groups (AWS: 120,000)."""
    fifo_in_flight: int | None = None
    """Messages a FIFO queue holds in flight (AWS: 120,000)."""
    dynamo_write_units: float | None = None
    """Write units a second per partition (AWS: 1,000)."""
    dynamo_read_units: float | None = None
    """Read units a second per partition (AWS: 3,000)."""
    dynamo_partitions: int = 4
    """Partitions of each table: the key's hash places an item on one."""
    dynamo_error: DynamoError = "ProvisionedThroughputExceededException"
    s3_writes_per_prefix: float | None = None
    """PUT-class requests a second per prefix (AWS: 3,500)."""
    s3_reads_per_prefix: float | None = None
    """GET-class requests a second per prefix (AWS: 5,500)."""


@dataclass
class Enforcement:
    """What was refused, so a test can show the limit was reached (and the run came out exact all the same)."""

    throttled: Counter[str] = field(default_factory=Counter)
    """Answers refused, by ``service.Operation`` (``dynamodb.PutItem``, ``s3.PUT``)."""
    window_receives: int = 0
    """FIFO receives during which the head window hid messages."""
    quota_receives: int = 0
    """FIFO receives the in-flight quota left short or empty."""


class _Rates:
    """Units taken per (bucket) in the last second; a request that would pass the limit is refused, not counted."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._taken: dict[tuple[str, ...], deque[tuple[float, float]]] = {}

    def take(self, bucket: tuple[str, ...], units: float, limit: float) -> bool:
        now = self._clock()
        recent = self._taken.setdefault(bucket, deque())
        while recent and now - recent[0][0] >= 1.0:
            recent.popleft()
        if sum(u for _, u in recent) + units > limit and recent:
            return False  # (a request alone larger than the limit is let through once a second, not never)
        recent.append((now, units))
        return True


def partition_of(table: str, key: Mapping[str, Mapping[str, Any]], partition_name: str, partitions: int) -> int:
    """The partition an item lives on: its partition key's hash, over the table's key space cut in equal ranges."""
    value = key.get(partition_name, {})
    digest = hashlib.md5(json.dumps(value, sort_keys=True).encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest, "big") * partitions // _KEY_SPACE


class _Enforcer:
    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.log = Enforcement()
        self._rates = _Rates(clock)
        self._lock = threading.Lock()

    def answer(self, request: Any) -> tuple[int, dict[str, str], str] | None:
        """The service's refusal of this attempt, or None to let moto answer it."""
        target = request.headers.get("X-Amz-Target") or b""
        target = target.decode() if isinstance(target, bytes) else str(target)
        if target.startswith("DynamoDB_"):
            return self._dynamo(target.split(".", 1)[1], request)
        host = urlsplit(request.url).hostname or ""
        if "s3" in host.split(".") or host.startswith("s3."):
            return self._s3(request, host)
        return None

    def _dynamo(self, operation: str, request: Any) -> tuple[int, dict[str, str], str] | None:
        limits = self.limits
        if limits.dynamo_write_units is None and limits.dynamo_read_units is None:
            return None
        body = request.body
        params = json.loads(body.decode() if isinstance(body, bytes) else (body or "{}"))
        tables = MotoTables(region=_region(request))
        units: dict[tuple[str, str, int], float] = defaultdict(float)
        try:
            writes = item_writes(operation, params, tables.key_schema)
            reads = item_reads(operation, params)
            query = _query_partition(operation, params)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # malformed: moto refuses it itself
        factor = 2.0 if operation.startswith("Transact") else 1.0
        for write in writes:
            schema = tables.key_schema(write.table)
            if schema is not None and write.action != "ConditionCheck":
                part = partition_of(write.table, write.key, schema.partition, limits.dynamo_partitions)
                units[("write", write.table, part)] += factor
        for read in reads:
            schema = tables.key_schema(read.table)
            if schema is not None:
                part = partition_of(read.table, read.key, schema.partition, limits.dynamo_partitions)
                units[("read", read.table, part)] += factor * (1.0 if read.consistent else 0.5)
        if query is not None:
            table, value, consistent = query
            schema = tables.key_schema(table)
            if schema is not None:
                part = partition_of(table, {schema.partition: value}, schema.partition, limits.dynamo_partitions)
                units[("read", table, part)] += 1.0 if consistent else 0.5
        with self._lock:
            for (kind, table, part), taken in units.items():
                limit = limits.dynamo_write_units if kind == "write" else limits.dynamo_read_units
                if limit is not None and not self._rates.take(("dynamodb", kind, table, str(part)), taken, limit):
                    self.log.throttled[f"dynamodb.{operation}"] += 1
                    return _dynamo_refusal(limits.dynamo_error, table, part)
        return None

    def _s3(self, request: Any, host: str) -> tuple[int, dict[str, str], str] | None:
        write = request.method in _S3_WRITES
        limit = self.limits.s3_writes_per_prefix if write else self.limits.s3_reads_per_prefix
        if limit is None:
            return None
        path = unquote(urlsplit(request.url).path).lstrip("/")
        bucket, _, key = path.partition("/") if host.startswith("s3.") else (host.split(".")[0], "/", path)
        prefix = key.rpartition("/")[0]
        with self._lock:
            if self._rates.take(("s3", "write" if write else "read", bucket, prefix), 1.0, limit):
                return None
            self.log.throttled[f"s3.{request.method}"] += 1
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            "<Message>Please reduce your request rate.</Message><RequestId>EMULATED</RequestId></Error>"
        )
        return 503, {"Content-Type": "application/xml"}, body


def _dynamo_refusal(code: DynamoError, table: str, partition: int) -> tuple[int, dict[str, str], str]:
    message = f"Throughput exceeds the current capacity of table {table}, partition {partition} (emulated)"
    body = json.dumps({"__type": _DYNAMO_TYPES[code], "message": message})
    return 400, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "EMULATED"}, body


def _query_partition(operation: str, params: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], bool] | None:
    """A Query's table, partition key value and consistency (``pk = :v`` in its key condition)."""
    if operation != "Query":
        return None
    condition = str(params.get("KeyConditionExpression", ""))
    values = params.get("ExpressionAttributeValues", {})
    for name, value in values.items():
        if f"= {name}" in condition or f"={name}" in condition:
            return params["TableName"], value, bool(params.get("ConsistentRead", False))
    return None


def _region(request: Any) -> str:
    host = urlsplit(request.url).hostname or ""
    parts = host.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "dynamodb" else "us-east-1"


def _windowed_receive(original: Callable[..., Any], enforcer: _Enforcer) -> Callable[..., Any]:
    """moto's FIFO receive, looking at the first ``fifo_window`` messages and keeping under ``fifo_in_flight``."""

    def receive(self: Any, queue_name: str, count: int, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        limits = enforcer.limits
        if not queue.fifo_queue or (limits.fifo_window is None and limits.fifo_in_flight is None):
            return original(self, queue_name, count, *args, **kwargs)
        with queue._messages_lock:
            messages = queue._messages
            if limits.fifo_in_flight is not None:
                in_flight = sum(1 for m in messages if not m.visible)
                room = limits.fifo_in_flight - in_flight
                if room < count:
                    enforcer.log.quota_receives += 1
                if room <= 0:
                    return []
                count = min(count, room)
            window = limits.fifo_window if limits.fifo_window is not None else len(messages)
            hidden = messages[window:]
            if hidden:
                enforcer.log.window_receives += 1
            queue._messages = messages[:window]
            try:
                return original(self, queue_name, count, *args, **kwargs)
            finally:
                queue._messages = queue._messages + hidden

    return receive


_active: list[_Enforcer] = []


@contextmanager
def enforced(limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> Iterator[Enforcement]:
    """Enforce ``limits`` on moto while inside; yields what was refused. Not nestable (one set of limits at once)."""
    if _active:
        raise RuntimeError("limits are enforced already")
    enforcer = _Enforcer(limits, clock)
    original_process = BotocoreStubber.process_request
    original_receive = sqs_models.SQSBackend.receive_message

    def process_request(self: BotocoreStubber, request: Any) -> Any:
        refused = enforcer.answer(request)
        return refused if refused is not None else original_process(self, request)

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]
    sqs_models.SQSBackend.receive_message = _windowed_receive(original_receive, enforcer)  # type: ignore[method-assign]
    _active.append(enforcer)
    try:
        yield enforcer.log
    finally:
        _active.clear()
        BotocoreStubber.process_request = original_process  # type: ignore[method-assign]
        sqs_models.SQSBackend.receive_message = original_receive  # type: ignore[method-assign]

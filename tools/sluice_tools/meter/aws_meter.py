"""An observer that tallies what each AWS call would be billed: requests, DynamoDB units, S3 bytes, SQS chunks.

DynamoDB units come from item sizes (:mod:`~sluice_tools.meter.dynamo_charges`), never from moto's
ConsumedCapacity, which is a constant. Sizes before a write are read from moto's backend in
``before`` and sizes after in ``after``: with threads, enter the local runner's ``serialized_calls``
inside :func:`~sluice_tools.meter.calls.observe_calls`, so its lock covers the observers too and no
other thread writes between the two readings.
"""

from __future__ import annotations

import math
import os
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sluice_tools.meter.calls import current_client
from sluice_tools.meter.dynamo_charges import Charge, SizedWrite, read_charges, sizes_before, write_charges
from sluice_tools.meter.dynamo_requests import WRITES
from sluice_tools.meter.moto_tables import MOTO_ACCOUNT, MotoTables
from sluice_tools.meter.tally import OperationTally, Tally

SQS_BILLED_CHUNK = 64 * 1024
"""SQS bills each 64 KB chunk of a request's payload as one request (SQS pricing page)."""
_UPLOADS = frozenset({"PutObject", "UploadPart"})


@dataclass
class _Before:
    """What ``before`` measured for the call ``after`` completes."""

    tables: MotoTables | None = None
    writes: list[SizedWrite] = field(default_factory=list)
    payload_bytes: int = 0


class _Pending(threading.local):
    def __init__(self) -> None:
        self.calls: list[_Before] = []


class AwsMeter:
    """Tallies every observed call per ``service.Operation``; :meth:`tally` snapshots, :meth:`reset` clears.

    Put it before any observer that refuses calls (``observe_calls(meter, contention)``): a call
    refused by an observer placed earlier never reaches the meter.
    """

    def __init__(self, *, account: str = MOTO_ACCOUNT) -> None:
        self._account = account
        self._lock = threading.Lock()
        self._pending = _Pending()
        self._operations: dict[str, OperationTally] = {}
        self._wru_by_table: dict[str, int] = defaultdict(int)
        self._rru_by_table: dict[str, float] = defaultdict(float)
        self._wru_by_partition: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._unsized_reads = 0

    def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        measured = _Before()
        if service == "dynamodb":
            measured.tables = MotoTables(region=current_client().meta.region_name, account=self._account)
            if operation in WRITES:
                measured.writes = _sizes_before(operation, params, measured.tables)
        elif service == "s3" and operation in _UPLOADS:
            measured.payload_bytes = _body_bytes(params)
        elif service == "sqs":
            measured.payload_bytes = _sqs_request_payload(operation, params)
        self._pending.calls.append(measured)

    def after(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        response: Mapping[str, Any] | None,
        error: BaseException | None,
        elapsed_s: float,
    ) -> None:
        measured = self._pending.calls.pop()
        charges: list[Charge] = []
        unsized = False
        billed, up, down = 1, 0, 0
        if measured.tables is not None:
            if operation in WRITES:
                charges = write_charges(operation, measured.writes, response, error, measured.tables)
            else:
                charges, unsized = read_charges(operation, params, response, measured.tables)
        elif service == "s3" and response is not None:
            up = measured.payload_bytes if operation in _UPLOADS else 0
            down = int(response.get("ContentLength", 0)) if operation == "GetObject" else 0
        elif service == "sqs":
            received = _sqs_response_payload(operation, response)
            payload = measured.payload_bytes + received
            billed = max(1, math.ceil(payload / SQS_BILLED_CHUNK))
            up, down = measured.payload_bytes, received
        name = f"{service}.{operation}"
        with self._lock:
            op = self._operations.get(name, OperationTally())
            self._operations[name] = replace(
                op,
                requests=op.requests + 1,
                errors=op.errors + (error is not None),
                elapsed_s=op.elapsed_s + elapsed_s,
                wru=op.wru + sum(c.wru for c in charges),
                rru=op.rru + sum(c.rru for c in charges),
                billed_requests=op.billed_requests + billed,
                bytes_up=op.bytes_up + up,
                bytes_down=op.bytes_down + down,
            )
            for charge in charges:
                self._add(charge)
            self._unsized_reads += unsized

    def _add(self, charge: Charge) -> None:
        if charge.wru:
            self._wru_by_table[charge.table] += charge.wru
            if charge.partition is not None:
                self._wru_by_partition[charge.table][charge.partition] += charge.wru
        if charge.rru:
            self._rru_by_table[charge.table] += charge.rru

    def tally(self) -> Tally:
        with self._lock:
            return Tally(
                operations=dict(sorted(self._operations.items())),
                wru_by_table=dict(self._wru_by_table),
                rru_by_table=dict(self._rru_by_table),
                wru_by_partition={table: dict(p) for table, p in self._wru_by_partition.items()},
                unsized_reads=self._unsized_reads,
            )

    def reset(self) -> None:
        with self._lock:
            self._operations.clear()
            self._wru_by_table.clear()
            self._rru_by_table.clear()
            self._wru_by_partition.clear()
            self._unsized_reads = 0


def _sizes_before(operation: str, params: Mapping[str, Any], tables: MotoTables) -> list[SizedWrite]:
    try:
        return sizes_before(operation, params, tables)
    except (KeyError, TypeError, ValueError, AttributeError):
        return []  # malformed parameters: botocore refuses the call itself, with its own error


def _body_bytes(params: Mapping[str, Any]) -> int:
    """An upload's size without consuming its body: ContentLength if given, else the body's length."""
    if "ContentLength" in params:
        return int(params["ContentLength"])
    body = params.get("Body", b"")
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    if isinstance(body, bytes | bytearray):
        return len(body)
    try:
        start = body.tell()
        end = body.seek(0, os.SEEK_END)
        body.seek(start)
    except (AttributeError, OSError, ValueError):
        return 0
    return int(end - start)


def _sqs_request_payload(operation: str, params: Mapping[str, Any]) -> int:
    if operation == "SendMessage":
        return _message_bytes(params)
    if operation == "SendMessageBatch":
        return sum(_message_bytes(entry) for entry in params.get("Entries", []))
    return 0


def _sqs_response_payload(operation: str, response: Mapping[str, Any] | None) -> int:
    if operation != "ReceiveMessage" or response is None:
        return 0
    return sum(_message_bytes(message, body="Body") for message in response.get("Messages", []))


def _message_bytes(message: Mapping[str, Any], *, body: str = "MessageBody") -> int:
    """A message's size as SQS counts it: the body plus each attribute's name, type and value."""
    size = len(str(message.get(body, "")).encode("utf-8"))
    for attributes in (message.get("MessageAttributes", {}), message.get("MessageSystemAttributes", {})):
        for name, attribute in attributes.items():
            size += len(name.encode("utf-8")) + len(str(attribute.get("DataType", "")).encode("utf-8"))
            if "StringValue" in attribute:
                size += len(str(attribute["StringValue"]).encode("utf-8"))
            if "BinaryValue" in attribute:
                value = attribute["BinaryValue"]
                size += len(value.encode("utf-8") if isinstance(value, str) else value)
    return size

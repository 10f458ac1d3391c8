"""What a run's AWS calls added up to: per ``service.Operation``, and DynamoDB write units per table and partition."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class OperationTally:
    """One ``service.Operation``: calls, and the units each service bills them by (zero where it does not apply)."""

    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    wru: int = 0
    """DynamoDB write request units."""
    rru: float = 0.0
    """DynamoDB read request units (halves for eventually consistent reads)."""
    billed_requests: int = 0
    """Requests as billed: SQS counts each 64 KB chunk of a payload as one; other services bill each call."""
    bytes_up: int = 0
    """S3 object bytes uploaded (PutObject and UploadPart bodies); SQS message bodies and attributes sent."""
    bytes_down: int = 0
    """S3 object bytes downloaded (GetObject ContentLength); SQS message bodies and attributes received."""


@dataclass(frozen=True)
class Tally:
    """A frozen snapshot of an :class:`~sluice_tools.meter.aws_meter.AwsMeter`; ``as_dict()`` is JSON-ready."""

    operations: dict[str, OperationTally] = field(default_factory=dict)
    wru_by_table: dict[str, int] = field(default_factory=dict)
    rru_by_table: dict[str, float] = field(default_factory=dict)
    wru_by_partition: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per table, WRU by partition key prefix: the partition key's value up to its first ``#`` (``claims``)."""
    unsized_reads: int = 0
    """Query and Scan calls that read items they did not return (a filter, or ``Select=COUNT``): their
    RRU counts only the items returned, so the true figure is higher."""

    def of(self, service: str) -> dict[str, OperationTally]:
        """The operations of one service, by operation name (``tally.of("s3")["PutObject"]``)."""
        prefix = f"{service}."
        return {name.removeprefix(prefix): op for name, op in self.operations.items() if name.startswith(prefix)}

    def requests(self, service: str | None = None) -> int:
        ops = self.operations.values() if service is None else self.of(service).values()
        return sum(op.requests for op in ops)

    @property
    def wru(self) -> int:
        return sum(op.wru for op in self.of("dynamodb").values())

    @property
    def rru(self) -> float:
        return sum(op.rru for op in self.of("dynamodb").values())

    @property
    def sqs_bytes(self) -> int:
        """SQS message payload sent and received: what crosses NAT to SQS with egress: fixed (no endpoint)."""
        return sum(op.bytes_up + op.bytes_down for op in self.of("sqs").values())

    @property
    def s3_bytes_up(self) -> int:
        return sum(op.bytes_up for op in self.of("s3").values())

    @property
    def s3_bytes_down(self) -> int:
        return sum(op.bytes_down for op in self.of("s3").values())

    @property
    def sqs_billed_requests(self) -> int:
        return sum(op.billed_requests for op in self.of("sqs").values())

    @property
    def lambda_invokes(self) -> int:
        return self.of("lambda").get("Invoke", OperationTally()).requests

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

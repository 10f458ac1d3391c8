"""List prices as data, and a tally priced in dollars, line by line.

Prices are those docs/costs.md gives: us-east-1, on-demand, free tiers ignored, read in November
2026. Check the current price list before relying on a number; pass another :class:`PriceList` to
price elsewhere.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from typing import Any, Literal

from botocore.session import get_session

from sluice_tools.meter.tally import Tally

S3RequestClass = Literal["put", "get", "free"]
GB = 1024**3
"""AWS bills data in binary gigabytes."""


@dataclass(frozen=True)
class PriceList:
    """Dollars per unit for what a run uses."""

    region: str = "us-east-1"
    read_on: str = "2026-11"
    source: str = "docs/costs.md"
    dynamodb_per_million_wru: float = 0.625
    dynamodb_per_million_rru: float = 0.125
    s3_per_thousand_put: float = 0.005
    """PUT, COPY, POST and LIST requests (S3 Standard)."""
    s3_per_thousand_get: float = 0.0004
    """GET, SELECT and all other requests (S3 Standard)."""
    sqs_per_million: float = 0.40
    """Standard queue requests, as billed (64 KB chunks)."""
    lambda_per_gb_s: float = 0.0000133334
    """arm64 duration."""
    lambda_per_million_requests: float = 0.20
    logs_per_gb: float = 0.50
    """CloudWatch Logs ingestion."""


US_EAST_1 = PriceList()


@dataclass(frozen=True)
class Cost:
    """Dollars per line, and their total; ``as_dict()`` is JSON-ready."""

    dynamodb_writes: float
    dynamodb_reads: float
    s3_put_class: float
    s3_get_class: float
    sqs: float
    lambda_compute: float
    lambda_requests: float
    logs: float
    total: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def price(
    tally: Tally,
    *,
    lambda_gb_s: float = 0.0,
    lambda_invocations: int = 0,
    log_bytes: int = 0,
    prices: PriceList = US_EAST_1,
) -> Cost:
    """What ``tally`` costs, with the Lambda and logs usage the tally cannot see.

    ``lambda_invocations`` counts invocations made other than by the Invoke API (event source
    mappings, schedules, handlers called directly in tests); Invoke calls in the tally are added.
    """
    put_class = get_class = 0
    for operation, op in tally.of("s3").items():
        match s3_request_class(operation):
            case "put":
                put_class += op.requests
            case "get":
                get_class += op.requests
    lines = {
        "dynamodb_writes": tally.wru * prices.dynamodb_per_million_wru / 1e6,
        "dynamodb_reads": tally.rru * prices.dynamodb_per_million_rru / 1e6,
        "s3_put_class": put_class * prices.s3_per_thousand_put / 1e3,
        "s3_get_class": get_class * prices.s3_per_thousand_get / 1e3,
        "sqs": tally.sqs_billed_requests * prices.sqs_per_million / 1e6,
        "lambda_compute": lambda_gb_s * prices.lambda_per_gb_s,
        "lambda_requests": (lambda_invocations + tally.lambda_invokes) * prices.lambda_per_million_requests / 1e6,
        "logs": log_bytes / GB * prices.logs_per_gb,
    }
    return Cost(**lines, total=sum(lines.values()))


@cache
def s3_request_class(operation: str) -> S3RequestClass:
    """The S3 price class of an operation, from its HTTP method in botocore's model of S3.

    PUT-class: PUT, COPY, POST and LIST (so CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
    CopyObject, ListObjectsV2); free: DELETE and CANCEL (DeleteObject, AbortMultipartUpload), which the
    S3 price list does not charge; GET-class: GET, HEAD, SELECT and everything else.
    """
    if operation.startswith("List"):
        return "put"
    if operation == "SelectObjectContent":
        return "get"
    method = _s3_methods().get(operation)
    if method == "DELETE":
        return "free"
    return "put" if method in ("PUT", "POST") else "get"


@cache
def _s3_methods() -> dict[str, str]:
    model = get_session().get_service_model("s3")
    return {name: model.operation_model(name).http["method"] for name in model.operation_names}

"""List prices as data, and a tally priced in dollars, line by line.

The price list and the arithmetic from units to dollars are the finalizer's own (``sluice.domain.cost``,
which ships): a metered tally is priced as a :class:`RunUsage`, so the estimate and ``make cost`` cannot
disagree on a line. us-east-1, on-demand, free tiers ignored, read in November 2026.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from typing import Any, Literal

from botocore.session import get_session

from sluice.domain.cost import US_EAST_1, PriceList, RunUsage

__all__ = ["US_EAST_1", "Cost", "PriceList", "price", "s3_request_class"]
from sluice_tools.meter.tally import Tally

S3RequestClass = Literal["put", "get", "free"]


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
    usage = RunUsage(
        write_units=tally.wru,
        read_units=tally.rru,
        s3_puts=put_class,
        s3_gets=get_class,
        sqs_requests=tally.sqs_billed_requests,
        lambda_gb_s=lambda_gb_s,
        lambda_requests=lambda_invocations + tally.lambda_invokes,
        log_bytes=log_bytes,
    )
    return Cost(**usage.price(prices))


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

"""What a run costs on AWS, estimated from the run's own counts at list prices.

The finalizer fills a :class:`RunUsage` from what it counted (URL results and their sizes, links
claimed, parts and output written, time spent fetching) and prices it; ``make cost`` checks the
estimate against every call metered on the emulated stack. Prices: us-east-1, on-demand, free
tiers ignored, read in November 2026 (see docs/costs.md); pass another :class:`PriceList` to
price elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

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
    sqs_per_million: float = 0.50
    """FIFO queue requests, as billed (64 KB chunks): the frontier is FIFO (a message group per host)."""
    lambda_per_gb_s: float = 0.0000133334
    """arm64 duration."""
    lambda_per_million_requests: float = 0.20
    logs_per_gb: float = 0.50
    """CloudWatch Logs ingestion."""
    nat_gateway_per_hour: float = 0.045
    """With ``egress: fixed``: each NAT gateway, every hour it exists."""
    nat_per_gb: float = 0.045
    """With ``egress: fixed``: NAT data processing, each GB in either direction."""
    public_ipv4_per_hour: float = 0.005
    """Each public IPv4 address, the Elastic IPs of the NAT gateways included."""
    cross_az_per_gb: float = 0.01
    """Data between zones, each direction: a fetcher in a zone without a NAT gateway of its own."""
    interface_endpoint_per_hour: float = 0.01
    """An interface VPC endpoint, per zone (the stack builds none: docs/costs.md says why)."""
    interface_endpoint_per_gb: float = 0.01
    vended_logs_per_gb: float = 0.50
    """VPC flow logs delivered to CloudWatch Logs."""
    athena_per_tb_scanned: float = 5.0
    """Athena SQL queries (the Parquet copy's ``UNLOAD``, one a table a run): bytes scanned, each query rounded up
    to the next MB with a 10 MB minimum (``make cost`` prices it, ``bench/parquet_copy_cost.py``)."""


US_EAST_1 = PriceList()


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run used, as counted by its finalizer (the estimate's inputs, shown in the summary)."""

    write_units: float
    """DynamoDB: each URL's result (by its size), each link's claim, progress reports, the run item."""
    read_units: float
    """DynamoDB: the batches' look-ups of their URLs, the scheduler's and the finalizer's scans."""
    s3_puts: int
    s3_gets: int
    sqs_requests: float
    lambda_gb_s: float
    lambda_requests: int
    log_bytes: int

    def price(self, prices: PriceList = US_EAST_1) -> dict[str, float]:
        """Dollars per line, and ``total``: the one place a count becomes dollars (``make cost`` prices its
        metered tally through here too)."""
        lines = {
            "dynamodb_writes": self.write_units * prices.dynamodb_per_million_wru / 1e6,
            "dynamodb_reads": self.read_units * prices.dynamodb_per_million_rru / 1e6,
            "s3_put_class": self.s3_puts * prices.s3_per_thousand_put / 1e3,
            "s3_get_class": self.s3_gets * prices.s3_per_thousand_get / 1e3,
            "sqs": self.sqs_requests * prices.sqs_per_million / 1e6,
            "lambda_compute": self.lambda_gb_s * prices.lambda_per_gb_s,
            "lambda_requests": self.lambda_requests * prices.lambda_per_million_requests / 1e6,
            "logs": self.log_bytes / GB * prices.logs_per_gb,
        }
        return lines | {"total": sum(lines.values())}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2
"""Transactional reads and writes cost twice the standard units, per item (DynamoDB's on-demand pricing page)."""


def write_units(item_bytes: int) -> int:
    """DynamoDB's write request units for one item of this size: a unit per started KB, at least one."""
    return max(1, math.ceil(item_bytes / WRITE_UNIT_BYTES))


def read_units(total_bytes: int, *, consistent: bool) -> float:
    """Read request units for this many bytes read as one request: a unit per started 4 KB, at least one.

    At least one: the API reference says a Query that returns nothing, and a GetItem of a missing item,
    still consume the minimum read units of their kind. An eventually consistent read costs half (so 0.5
    for anything up to 4 KB). GetItem and each key of a BatchGetItem are sized item by item; a Query or
    Scan sums the items it read, then rounds once.
    """
    units = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2

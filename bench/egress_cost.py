"""What ``egress: fixed`` adds, from `make cost`'s measured bytes a page: a section of docs/costs.md.

With fixed egress, everything a fetcher sends or receives that is not DynamoDB or S3 (the gateway
endpoints take those, free) crosses a NAT gateway and pays its per-GB processing: the sites'
answers and the crawl's request heads, as the demo site counted them on its sockets, and SQS's
message payloads, as the meter counted them. The monthly part is the gateways' and addresses' hours.
"""

from __future__ import annotations

from typing import Any

from sluice.domain.cost import GB

HOURS_A_MONTH = 730
MILLION = 1_000_000
ZONES = 2
"""The egress VPC's availability zones (infra/config.py ``egress_azs``)."""
ENDPOINT_SERVICES = ("SQS", "Secrets Manager")
FLOW_RECORDS_PER_CONNECTION = 4
"""Stated: a connection is a flow each way at the function's interface and again at the NAT gateway's."""
FLOW_RECORD_BYTES = 110
"""Stated: one flow log record in the default format (14 fields, about 110 characters)."""


def nat_bytes_a_page(scenario: dict[str, Any]) -> dict[str, float]:
    """Bytes a page through NAT: the site's wire both ways, and SQS's payloads, as measured (every SQS call's:
    an upper bound, since the scheduler's sends and the event source's receives do not pass the fetcher's NAT)."""
    pages = max(1, scenario["pages"])
    wire = scenario["site_wire"]
    site = (wire["bytes_received"] + wire["bytes_sent"]) / pages
    sqs = scenario["sqs_bytes"] / pages
    return {"site": site, "sqs": sqs, "total": site + sqs, "connections": wire["connections"] / pages}


def per_million(prices: dict[str, float], scenario: dict[str, Any], nat_gateways: int) -> dict[str, float]:
    """Dollars per million pages that fixed egress adds, by line."""
    bytes_page = nat_bytes_a_page(scenario)
    gb = bytes_page["total"] * MILLION / GB
    # With one gateway for two zones, the other zone's half of the traffic crosses zones, billed each way.
    crossing = gb * (ZONES - nat_gateways) / ZONES * prices["cross_az_per_gb"] * 2
    flow_gb = bytes_page["connections"] * MILLION * FLOW_RECORDS_PER_CONNECTION * FLOW_RECORD_BYTES / GB
    lines = {
        "nat_processing": gb * prices["nat_per_gb"],
        "cross_zone": crossing,
        "flow_logs": flow_gb * prices["vended_logs_per_gb"],
    }
    return lines | {"total": sum(lines.values())}


def monthly(prices: dict[str, float], nat_gateways: int) -> dict[str, float]:
    """Dollars a month that fixed egress adds whether runs happen or not."""
    lines = {
        "nat_hours": nat_gateways * HOURS_A_MONTH * prices["nat_gateway_per_hour"],
        "addresses": nat_gateways * HOURS_A_MONTH * prices["public_ipv4_per_hour"],
        "gateway_endpoints": 0.0,
    }
    return lines | {"total": sum(lines.values())}


def interface_endpoints_monthly(prices: dict[str, float]) -> float:
    """What SQS and Secrets Manager interface endpoints in both zones would cost a month (not built)."""
    return len(ENDPOINT_SERVICES) * ZONES * HOURS_A_MONTH * prices["interface_endpoint_per_hour"]


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 0.1 else f"${value:,.2f}"


def render(report: dict[str, Any]) -> list[str]:
    """The section's lines (empty if the report predates the byte counts)."""
    scenarios = [s for s in report["scenarios"] if "site_wire" in s]
    if not scenarios:
        return []
    prices = report["prices"]
    one, two = monthly(prices, 1), monthly(prices, 2)
    endpoints = interface_endpoints_monthly(prices)
    out = [
        "## Fixed egress (`egress: fixed`)",
        "",
        "With `make deploy EGRESS=fixed` the fetcher runs in private subnets behind NAT gateways whose",
        "Elastic IPs a site can allowlist ([runbook](operations.md#fixed-egress)). DynamoDB and S3 take",
        "gateway endpoints, which are free; everything else a fetcher sends or receives crosses NAT at",
        f"{_price(prices['nat_per_gb'])} per GB processed.",
        "",
        "Per month, whether runs happen or not:",
        "",
        "| what | one NAT gateway | one per zone (two) |",
        "|---|---:|---:|",
        f"| NAT gateway hours ({HOURS_A_MONTH} h × {_price(prices['nat_gateway_per_hour'])}) |"
        f" {_usd(one['nat_hours'])} | {_usd(two['nat_hours'])} |",
        f"| Elastic IPs ({HOURS_A_MONTH} h × {_price(prices['public_ipv4_per_hour'])} each) |"
        f" {_usd(one['addresses'])} | {_usd(two['addresses'])} |",
        "| DynamoDB and S3 gateway endpoints | $0 | $0 |",
        f"| **total** | **{_usd(one['total'])}** | **{_usd(two['total'])}** |",
        "",
        "Per page, measured on the runs above: the site's bytes on its sockets both ways (request heads,",
        "answers as sent: compressed, with their heads) and every SQS message payload the meter counted, an",
        "upper bound (the scheduler's sends and the event source's receives do not pass the fetcher's NAT).",
        "TCP/IP and TLS framing and the AWS APIs' own HTTP heads are not counted (a few percent more).",
        "",
        "| run | bytes a page through NAT (site + SQS) | connections a page | NAT per million pages |"
        " one gateway: + cross-zone | flow logs (modelled) | **added per million pages**, one / two gateways |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scenarios:
        bytes_page = nat_bytes_a_page(s)
        single, double = per_million(prices, s, 1), per_million(prices, s, 2)
        out.append(
            f"| {s['label']} | {bytes_page['total']:,.0f} ({bytes_page['site']:,.0f} + {bytes_page['sqs']:,.0f}) |"
            f" {bytes_page['connections']:.3f} | {_usd(single['nat_processing'])} | {_usd(single['cross_zone'])} |"
            f" {_usd(single['flow_logs'])} | **{_usd(single['total'])}** / **{_usd(double['total'])}** |"
        )
    out += [
        "",
        f"Scale by your pages' size: each KB a page adds {_usd(1024 * MILLION / GB * prices['nat_per_gb'])}"
        " per million pages of NAT processing.",
        f"The demo's pages are small; a 100 KB page costs {_usd(100 * 1024 * MILLION / GB * prices['nat_per_gb'])}"
        " per million pages through NAT.",
        "With one gateway for two zones, half the fetchers' traffic crosses zones"
        f" ({_price(prices['cross_az_per_gb'])} per GB each way).",
        f"Flow logs are modelled, not measured: {FLOW_RECORDS_PER_CONNECTION} records a connection (each way,",
        f"at the function's and the gateway's interfaces) of about {FLOW_RECORD_BYTES} bytes, at the measured",
        f"connections a page and {_price(prices['vended_logs_per_gb'])} per GB delivered to CloudWatch Logs;",
        "keep-alive makes them a rounding error.",
        "",
        "SQS and Secrets Manager go through NAT too. Interface endpoints for both, in both zones, would",
        f"cost {_usd(endpoints)} a month ({len(ENDPOINT_SERVICES)} × {ZONES} × {HOURS_A_MONTH} h ×"
        f" {_price(prices['interface_endpoint_per_hour'])}) plus {_price(prices['interface_endpoint_per_gb'])}"
        " per GB,",
        f"to save {_price(prices['nat_per_gb'] - prices['interface_endpoint_per_gb'])} per GB of SQS payload,"
        " which the table shows is a small part of a page's bytes;",
        "Secrets Manager is read once per container. So the stack builds none: an interface endpoint pays",
        f"off only past about {endpoints / (prices['nat_per_gb'] - prices['interface_endpoint_per_gb']):,.0f}"
        " GB of SQS traffic a month.",
        "",
    ]
    return out


def _price(value: float) -> str:
    return "$" + f"{value:.10f}".rstrip("0").rstrip(".")

"""What `egress: fixed` adds, as `make cost` writes it in docs/costs.md: the arithmetic on measured bytes."""

from __future__ import annotations

from typing import Any

import pytest
from bench import egress_cost

from sluice.domain.cost import GB, US_EAST_1

PRICES = vars(US_EAST_1)


def _scenario(pages: int, received: int, sent: int, sqs: int, connections: int) -> dict[str, Any]:
    return {
        "label": "a run",
        "pages": pages,
        "site_wire": {"bytes_received": received, "bytes_sent": sent, "connections": connections},
        "sqs_bytes": sqs,
    }


def test_bytes_a_page_are_the_sites_wire_both_ways_and_the_sqs_payloads() -> None:
    got = egress_cost.nat_bytes_a_page(_scenario(1000, 300_000, 5_000_000, 1_700_000, 50))
    assert got == {"site": 5300.0, "sqs": 1700.0, "total": 7000.0, "connections": 0.05}


def test_a_gigabyte_a_million_pages_costs_nat_processing_and_half_of_it_crosses_zones_with_one_gateway() -> None:
    # 1,073.741824 bytes a page: one GB over a million pages.
    scenario = _scenario(1_000_000, 0, GB, 0, 0)
    one = egress_cost.per_million(PRICES, scenario, 1)
    two = egress_cost.per_million(PRICES, scenario, 2)
    assert one["nat_processing"] == pytest.approx(0.045)
    assert one["cross_zone"] == pytest.approx(0.01)  # half a GB, $0.01 each way
    assert two["cross_zone"] == 0
    assert one["flow_logs"] == 0
    assert two["total"] == pytest.approx(0.045)


def test_a_month_is_the_gateways_and_their_addresses_hours() -> None:
    assert egress_cost.monthly(PRICES, 1) == pytest.approx(
        {"nat_hours": 32.85, "addresses": 3.65, "gateway_endpoints": 0.0, "total": 36.50}
    )
    assert egress_cost.monthly(PRICES, 2)["total"] == pytest.approx(73.00)
    assert egress_cost.interface_endpoints_monthly(PRICES) == pytest.approx(29.20)


def test_the_section_is_left_out_of_a_report_without_byte_counts() -> None:
    report = {"prices": PRICES, "scenarios": [{"label": "old", "pages": 10}]}
    assert egress_cost.render(report) == []
    report["scenarios"] = [_scenario(1000, 300_000, 5_000_000, 1_700_000, 50)]
    section = "\n".join(egress_cost.render(report))
    assert "| a run | 7,000 (5,300 + 1,700) | 0.050 |" in section
    assert "**$36.50** | **$73.00** |" in section

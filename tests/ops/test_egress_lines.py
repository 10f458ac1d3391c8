"""What `sluice show` and `sluice run` say of a run's route: direct, fixed addresses, or proxies by tier."""

from __future__ import annotations

from typing import Any

from sluice.domain.summary import RunSummary
from sluice_tools.runner.summary import egress_lines


def _summary(**sections: Any) -> RunSummary:
    """A stored summary with only the sections a test names (read as any summary.json is read)."""
    return RunSummary.from_json({"crawl": "shop", "run_id": "r", **sections})


def test_a_summary_from_before_routes_were_kept_says_nothing_of_them() -> None:
    assert egress_lines(_summary(pages={})) == []


def test_a_direct_run_and_a_fixed_one_say_so() -> None:
    assert egress_lines(_summary(egress={"route": "direct"})) == ["  egress   direct: no fixed address, no proxy"]
    fixed = _summary(egress={"route": "fixed", "addresses": ["203.0.113.7", "203.0.113.8"]})
    assert egress_lines(fixed) == ["  egress   fixed address: 203.0.113.7, 203.0.113.8"]


def test_a_pooled_run_gives_its_pages_by_tier_and_each_proxy_with_its_reason() -> None:
    summary = _summary(
        egress={"route": "proxies", "pages_by_tier": {"0": 7, "1": 2}},
        proxies={
            "refuses": {"tier": 0, "pages": 0, "failures": 1, "ejected": True, "reason": "connect failed"},
            "works": {"tier": 0, "pages": 7, "failures": 2, "ejected": False, "reason": "403"},
            "premium": {"tier": 1, "pages": 2, "failures": 0, "ejected": False, "reason": None},
        },
    )
    assert egress_lines(summary) == [
        "  egress   proxies: tier 0 7 page(s), tier 1 2 page(s)",
        "  proxy    refuses (tier 0): 0 page(s), 1 failure(s), ejected: connect failed",
        "  proxy    works (tier 0): 7 page(s), 2 failure(s), last failure: 403",
        "  proxy    premium (tier 1): 2 page(s), 0 failure(s)",
    ]

"""How a run's requests left: direct, from the stack's fixed addresses, or through a proxy pool by tier.

The words a page's failure uses when no proxy is left, and each proxy's share of a run as the
finalizer counts it from the pages' results (``proxies.NAME: pages, failures, ejected, reason``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

POOL_EMPTY = "proxy pool empty: every proxy was ejected"
"""The failure reason of a page no proxy was left to carry (the ``proxy_pool`` check reads it)."""


@dataclass
class ProxyTally:
    """One proxy of the pool over a run: pages it carried, requests it failed, and whether it was ejected."""

    tier: int = 0
    pages: int = 0
    failures: int = 0
    ejected: bool = False
    reason: str | None = None
    """Why it was ejected (the first container's words), or the last failure's when it was not."""

    def to_json(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "pages": self.pages,
            "failures": self.failures,
            "ejected": self.ejected,
            "reason": self.reason,
        }


def egress_of(*, fixed_ips: Sequence[str], proxies: Mapping[str, ProxyTally]) -> dict[str, Any]:
    """The route a run's requests took, for its summary: ``proxies`` (pages by tier), else ``fixed`` (the
    stack's addresses), else ``direct`` (Lambda's or this machine's own addresses)."""
    if proxies:
        tiers: dict[str, int] = {}
        for proxy in proxies.values():
            key = str(proxy.tier)
            tiers[key] = tiers.get(key, 0) + proxy.pages
        route: dict[str, Any] = {"route": "proxies", "pages_by_tier": dict(sorted(tiers.items()))}
        if fixed_ips:
            route["via"] = list(fixed_ips)  # the proxies see the stack's fixed addresses
        return route
    if fixed_ips:
        return {"route": "fixed", "addresses": list(fixed_ips)}
    return {"route": "direct"}

"""The fetch layer: safe, polite HTTP fetching with typed outcomes.

Names are loaded on first use, so ``sluice.fetch.outcomes`` (used by the scheduler and the
finalizer) does not pull in the HTTP stack a cold start would pay for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import FetchStats, PageFetcher
    from .outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
    from .robots import RobotsCache
    from .safety import AddressGuard

_HOMES = {
    "FetchStats": "client",
    "PageFetcher": "client",
    "Failed": "outcomes",
    "Fetched": "outcomes",
    "FetchOutcome": "outcomes",
    "NotModified": "outcomes",
    "Skipped": "outcomes",
    "Validators": "outcomes",
    "RobotsCache": "robots",
    "AddressGuard": "safety",
}

__all__ = [
    "AddressGuard",
    "Failed",
    "FetchOutcome",
    "FetchStats",
    "Fetched",
    "NotModified",
    "PageFetcher",
    "RobotsCache",
    "Skipped",
    "Validators",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module 'sluice.fetch' has no attribute {name!r}")
    return getattr(import_module(f".{_HOMES[name]}", __name__), name)

"""The fetch layer: safe, polite HTTP fetching with typed outcomes."""

from .client import FetchStats, PageFetcher
from .outcomes import Failed, Fetched, FetchOutcome, NotModified, Skipped, Validators
from .robots import RobotsCache
from .safety import AddressGuard

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

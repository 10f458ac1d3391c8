"""Typed results of one page fetch: every page ends as exactly one of these."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field


def content_hash(body: bytes) -> str:
    """The first 32 hex characters of the body's SHA-256."""
    return hashlib.sha256(body).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Validators:
    """What a later conditional request sends back: ETag and Last-Modified as received."""

    etag: str | None = None
    last_modified: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Validators:
        """The validators of a response (lower-cased header names; None for each one missing)."""
        return cls(headers.get("etag"), headers.get("last-modified"))

    def request_headers(self) -> dict[str, str]:
        """The conditional request headers these validators call for."""
        headers: dict[str, str] = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers

    def or_else(self, older: Validators | None) -> Validators:
        """These validators, each missing one taken from ``older``."""
        if older is None:
            return self
        return Validators(self.etag or older.etag, self.last_modified or older.last_modified)


@dataclass(frozen=True, slots=True)
class Fetched:
    """A page body (decoded from its transfer encoding, never from its charset)."""

    url: str
    final_url: str
    status: int
    content_type: str
    """The Content-Type header as sent, parameters included (``text/html`` when absent)."""
    body: bytes = field(repr=False)
    validators: Validators
    attempts: int
    elapsed_s: float

    @property
    def content_hash(self) -> str:
        """The first 32 hex characters of the body's SHA-256, computed when read (the pipeline reads it once)."""
        return content_hash(self.body)


@dataclass(frozen=True, slots=True)
class NotModified:
    """A 304 answer to a conditional request; ``validators`` are the ones to keep."""

    url: str
    final_url: str
    validators: Validators
    attempts: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class Failed:
    """The page could not be fetched; ``retryable`` says whether a later try may succeed."""

    url: str
    reason: str
    retryable: bool
    status: int | None = None
    retry_after_s: float | None = None
    """How long the server (or the backoff) asks to wait before the next try, when known."""
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class Skipped:
    """The page was deliberately not fetched: robots.txt, address safety, content type."""

    url: str
    reason: str


FetchOutcome = Fetched | NotModified | Failed | Skipped

"""An immutable pre-rendered resource with its validators and a lazily cached gzip body."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

HTML = "text/html; charset=utf-8"
EPOCH = 1_704_067_200
"""2024-01-01T00:00:00Z: Last-Modified of version 0; each version adds one day."""


def version_time(version: int) -> int:
    """Deterministic Last-Modified (epoch seconds) of content last changed in `version`."""
    return EPOCH + 86_400 * version


def http_date(epoch: float) -> str:
    """RFC 9110 IMF-fixdate."""
    return formatdate(epoch, usegmt=True)


def parse_http_date(value: str) -> float | None:
    """Epoch seconds of an HTTP date, or None when unparsable."""
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


@dataclass(frozen=True)
class Page:
    """Body bytes plus strong ETag (hash of the identity body, shared by the gzip variant)."""

    body: bytes
    content_type: str = HTML
    last_modified: int = EPOCH
    etag: str = field(init=False)
    last_modified_http: str = field(init=False)
    _gzip: list[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        digest = hashlib.blake2b(self.body, digest_size=12).hexdigest()
        object.__setattr__(self, "etag", f'"{digest}"')
        object.__setattr__(self, "last_modified_http", http_date(self.last_modified))
        object.__setattr__(self, "_gzip", [])

    @classmethod
    def html(cls, text: str, version: int = 0) -> Page:
        """A UTF-8 HTML page last modified in `version`."""
        return cls(text.encode("utf-8"), HTML, version_time(version))

    @property
    def compressible(self) -> bool:
        """Worth gzipping: textual and at least 256 bytes."""
        textual = self.content_type.startswith(("text/", "application/xml", "application/json"))
        return textual and len(self.body) >= 256

    @property
    def gzipped(self) -> bytes:
        """The gzip-encoded body, compressed once on first use (mtime 0: deterministic)."""
        if not self._gzip:
            self._gzip.append(gzip.compress(self.body, 6, mtime=0))
        return self._gzip[0]

    def not_modified(self, if_none_match: str | None, if_modified_since: str | None) -> bool:
        """True when the request's validators say the client's copy is current."""
        if if_none_match is not None:
            tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
            return "*" in tags or self.etag in tags
        if if_modified_since is not None:
            since = parse_http_date(if_modified_since)
            return since is not None and self.last_modified <= since
        return False

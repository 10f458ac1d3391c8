"""URL handling: resolving links as browsers do, one canonical form per page, and the crawl's scope.

Pages are written for browsers, and browsers resolve links by the WHATWG URL Standard, so links
are parsed and resolved by ada (a conformant parser; the standard's own test data is in the
suite). The canonical form adds what a crawler needs on top of the standard's serialization:
no fragment, no credentials, sorted query pairs and RFC 3986 percent-encoding normalization.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import ada_url

from sluice.extraction.patterns import Pattern, compile_pattern

if TYPE_CHECKING:
    from sluice.spec import CrawlSpec

_DEFAULT_PORT = {"http": 80, "https": 443}
_HTTP = ("http://", "https://")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def resolve_link(href: str | None, page_url: str, base_href: str | None = None) -> str | None:
    """The absolute http(s) URL ``href`` points to from ``page_url`` (or its ``<base href>``), else None.

    Resolution follows the WHATWG URL Standard, as a browser would: an empty href is the page
    itself; None for a missing href, for ``javascript:``, ``mailto:``, ``tel:``, ``data:`` and any
    other non-http(s) result, and for inputs the standard calls invalid (a space in a host,
    ``http://192.168.0.257``). The result is the standard's serialization (fragment and
    credentials kept), not the canonical form.
    """
    if href is None:
        return None
    base = page_url
    if base_href:
        resolved_base = _join(page_url, base_href)
        if resolved_base is not None and resolved_base.startswith(_HTTP):
            base = resolved_base
    url = _join(base, href)
    return url if url is not None and url.startswith(_HTTP) else None


def canonical_link(href: str | None, base_url: str) -> str | None:
    """:func:`resolve_link` then :func:`canonicalize_url` in one parse: the form a link is queued in."""
    if href is None:
        return None
    url = _join(base_url, href)
    return _canonical(url) if url is not None and url.startswith(_HTTP) else None


def canonicalize_url(url: str) -> str:
    """One spelling per page: the standard's serialization with no fragment and no credentials,
    query pairs sorted, and percent-escapes of unreserved characters decoded (others upper-cased).

    Raises ValueError for a URL that is not a valid absolute http(s) URL.
    """
    try:
        href: str = ada_url.URL(url).href
    except ValueError:
        raise ValueError(f"{url[:200]!r} is not a valid URL") from None
    if not href.startswith(_HTTP):
        raise ValueError(f"{url[:200]!r} is not an http(s) URL")
    return _canonical(href)


def inspect_url(url: str) -> tuple[str, bool]:
    """``(canonical form, carries credentials)`` of an absolute http(s) URL, in one parse.

    Raises ValueError as :func:`canonicalize_url` does.
    """
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        raise ValueError(f"{url[:200]!r} is not a valid URL") from None
    href: str = parsed.href
    if not href.startswith(_HTTP):
        raise ValueError(f"{url[:200]!r} is not an http(s) URL")
    return _canonical(href), bool(parsed.username or parsed.password)


def has_credentials(url: str) -> bool:
    """True when ``url`` carries a user name or password (``http://user:pass@host/``)."""
    try:
        parsed = ada_url.URL(url)
    except ValueError:
        return False
    return bool(parsed.username or parsed.password)


def _join(base: str, href: str) -> str | None:
    try:
        joined: str = ada_url.join_url(base, href)
    except ValueError:
        return None
    return joined


def _canonical(href: str) -> str:
    """The canonical form of a serialized special (http/https) URL; string work only, no parsing."""
    cut = href.find("#")
    if cut >= 0:
        href = href[:cut]
    start = href.find("//") + 2
    path_at = href.find("/", start)  # a special URL's serialization always has a path
    if path_at < 0:
        path_at = len(href)
    at = href.rfind("@", start, path_at)  # an "@" inside credentials is serialized as %40
    if at >= 0:
        href = href[:start] + href[at + 1 :]
        path_at -= at + 1 - start
    query_at = href.find("?", path_at)
    if query_at >= 0:
        pairs = sorted(pair for pair in href[query_at + 1 :].split("&") if pair)
        href = href[:query_at] + ("?" + "&".join(pairs) if pairs else "")
    if href.find("%", path_at) >= 0:
        href = href[:path_at] + _PERCENT.sub(_normal_escape, href[path_at:])
    return href


def _normal_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(0)[1:], 16))
    return char if char in _UNRESERVED else match.group(0).upper()


@dataclass(frozen=True, slots=True)
class Scope:
    """Which URLs a crawl may visit: allowed hosts (and their subdomains), then allow/deny patterns."""

    hosts: frozenset[str]
    host_ports: frozenset[tuple[str, int]]
    allow: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()

    @classmethod
    def from_spec(cls, spec: CrawlSpec) -> Scope:
        """The scope of ``spec``: ``spec.domains()`` plus ``follow.allow`` and ``follow.deny``."""
        hosts: set[str] = set()
        host_ports: set[tuple[str, int]] = set()
        for domain in spec.domains():
            host, _, port = domain.lower().rstrip(".").partition(":")
            if port:
                host_ports.add((host.rstrip("."), int(port)))
            else:
                hosts.add(host)
        return cls(
            frozenset(hosts),
            frozenset(host_ports),
            tuple(compile_pattern(p) for p in spec.follow.allow),
            tuple(compile_pattern(p) for p in spec.follow.deny),
        )

    def allows(self, url: str) -> bool:
        """True if a run may visit ``url``."""
        return self.reason(url) is None

    def reason(self, url: str) -> str | None:
        """Why ``url`` is out of scope, or None if it is in scope."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return "not a valid URL"
        if parts.scheme not in _DEFAULT_PORT:
            return "not an http(s) URL"
        host = (parts.hostname or "").rstrip(".")
        if not host:
            return "no host"
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                return f"host {host!r} is not a valid domain name"
        if not self._host_allowed(host, port if port is not None else _DEFAULT_PORT[parts.scheme]):
            return f"host {host!r} is not in the allowed domains"
        for pattern in self.deny:
            if pattern.search(url):
                return f"matches follow.deny {pattern.pattern!r}"
        if self.allow and not any(p.search(url) for p in self.allow):
            return "matches no follow.allow pattern"
        return None

    def _host_allowed(self, host: str, port: int) -> bool:
        suffix = host
        while True:
            if suffix in self.hosts or (suffix, port) in self.host_ports:
                return True
            dot = suffix.find(".")
            if dot < 0:
                return False
            suffix = suffix[dot + 1 :]

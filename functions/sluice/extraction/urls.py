"""URL handling for links: resolving hrefs, one canonical form per page, and the crawl's scope."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from w3lib.url import canonicalize_url as _w3lib_canonicalize
from w3lib.url import safe_url_string

from sluice.spec import CrawlSpec

_DEFAULT_PORT = {"http": 80, "https": 443}
# A scheme followed by ":" at the start of an href, e.g. "javascript:" or "HTTPS:".
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# WHATWG URL parsing drops these before anything else.
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_STRIP = "".join(chr(c) for c in range(0x21)) + "\x7f"
# Any character but printable ASCII less '"<>\\^`{|}': such URLs go through safe_url_string.
_UNSAFE = re.compile(r"[^!#-;=?-\[\]_a-z~]")
_DEFAULT_PORT_IN_NETLOC = re.compile(r"^(http://[^/?#]*?):(?:80)?(?=[/?#]|$)|^(https://[^/?#]*?):(?:443)?(?=[/?#]|$)")


def canonicalize_url(url: str) -> str:
    """One spelling per page: fragment dropped, query sorted, host lowercased, default port dropped.

    Raises ValueError for a URL that cannot be parsed (e.g. an unclosed IPv6 host).
    """
    canonical = _w3lib_canonicalize(url)
    return _DEFAULT_PORT_IN_NETLOC.sub(_without_port, canonical, count=1)


def _without_port(match: re.Match[str]) -> str:
    return match.group(1) or match.group(2)


def resolve_link(href: str | None, page_url: str, base_href: str | None = None) -> str | None:
    """The absolute http(s) URL ``href`` points to from ``page_url`` (or its ``<base href>``), else None.

    None for empty hrefs, ``javascript:``/``mailto:``/``tel:``/``data:`` and any other non-http(s)
    result. The result is made safe (spaces and non-ASCII percent-encoded) but not canonicalized.
    """
    if not href:
        return None
    href = href.strip(_STRIP)
    if "\t" in href or "\n" in href or "\r" in href:
        href = _TAB_NEWLINE.sub("", href)
    if not href:
        return None
    scheme = _SCHEME.match(href) if ":" in href else None
    if scheme is not None and scheme.group(1).lower() not in _DEFAULT_PORT:
        return None
    try:
        base = urljoin(page_url, base_href.strip(_STRIP)) if base_href else page_url
        url = _join_path(base, href) if scheme is None else None
        if url is None:
            url = urljoin(base, href)
            parts = urlsplit(url)
            if parts.scheme not in _DEFAULT_PORT or not parts.hostname:
                return None
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError:
        return None
    return safe_url_string(url) if _UNSAFE.search(url) else url


def _join_path(base: str, href: str) -> str | None:
    """RFC 3986 resolution of a path reference (``page-2.html``, ``../x``, ``/x?q``) against an http(s) base.

    The fast path for the links nearly every page has; None for anything else (``//host``, ``?q``, ``#f``).
    """
    first = href[0]
    if first in "?#" or href.startswith("//") or "\\" in href:
        return None
    split = _split_base(base)
    if split is None:
        return None
    origin, directory = split
    if "?" in href or "#" in href:
        end = len(href)
        for mark in "?#":
            found = href.find(mark, 0, end)
            if found >= 0:
                end = found
        path, rest = href[:end], href[end:]
    else:
        path, rest = href, ""
    if first != "/":
        path = directory + path
    # Every segment follows a "/", so a "." or ".." segment needs a "/." somewhere.
    if "/." in path:
        path = _remove_dot_segments(path)
    return origin + path + rest


@lru_cache(maxsize=1024)
def _split_base(base: str) -> tuple[str, str] | None:
    """``('https://host:port', '/directory/')`` of a valid http(s) base URL, else None."""
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number or out of range
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORT or not parts.hostname:
        return None
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}", path[: path.rfind("/") + 1]


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 on an absolute path."""
    segments = path.split("/")
    if "." not in segments and ".." not in segments:
        return path
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/".join(out) if len(out) > 1 else "/"


@dataclass(frozen=True, slots=True)
class Scope:
    """Which URLs a crawl may visit: allowed hosts (and their subdomains), then allow/deny patterns."""

    hosts: frozenset[str]
    host_ports: frozenset[tuple[str, int]]
    allow: tuple[re.Pattern[str], ...] = ()
    deny: tuple[re.Pattern[str], ...] = ()

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
            tuple(re.compile(p) for p in spec.follow.allow),
            tuple(re.compile(p) for p in spec.follow.deny),
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

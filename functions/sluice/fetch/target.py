"""A request's URL parsed once and cheaply: the canonical form the pipeline sends takes a short path.

``httpx.URL(text)`` parses in pure Python (about 36 µs a URL, measured in the engine's profile),
and every page paid it once per request. The URLs a fetcher is given are canonical already
(resolved and normalized by ada, :func:`sluice.extraction.urls.resolve_link`): lower-case http(s)
scheme and host, no user info, no default port, no fragment, every byte outside the safe set
percent-encoded. :func:`parse_target` checks that form with one regular expression and builds the
same :class:`httpx.URL` from its parts, and hands anything else (user info, upper case, IDNA,
IPv6, dot segments, characters httpx would escape, a default port) to ``httpx.URL`` as before, so
the result is the URL httpx gives in every case (``tests/fetch/test_target.py`` compares them).
The scheme, address, credentials and robots checks all still run on the result.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sluice.domain.hosts import host_key

if TYPE_CHECKING:
    import httpx

_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_SIMPLE = re.compile(
    r"(?P<scheme>https?)://(?P<host>[a-z0-9](?:[a-z0-9.\-]{0,251}[a-z0-9])?)(?::(?P<port>[1-9][0-9]{0,4}))?"
    rf"(?P<path>/(?:{_PCHAR}|/)*)(?:\?(?P<query>(?:{_PCHAR}|[/?])*))?"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_target(url: str) -> httpx.URL:
    """``httpx.URL(url)``, without httpx's parse for a canonical http(s) URL. Raises httpx.InvalidURL."""
    import httpx  # here, not at the module's import: the first request loads httpx, a cold start does not
    from httpx._urlparse import ParseResult

    match = _SIMPLE.fullmatch(url) if len(url) <= 65536 else None
    if match is None:
        return httpx.URL(url)
    scheme, host, port_text, path, query = match.group("scheme", "host", "port", "path", "query")
    port = int(port_text) if port_text is not None else None
    if (port is not None and (port > 65535 or port == _DEFAULT_PORTS[scheme])) or "/." in path or ".." in host:
        return httpx.URL(url)  # httpx normalizes these (or refuses them): let it
    parsed = httpx.URL.__new__(httpx.URL)
    parsed._uri_reference = ParseResult(scheme, "", host, port, path, query, None)
    return parsed


def target_host(url: httpx.URL) -> str:
    """:func:`sluice.domain.hosts.host_key` of ``url`` from its parsed parts (no second parse of its text)."""
    if url.port is not None and url.port > 65535:
        return host_key(str(url))  # urlsplit's port refuses it: the default port, as host_key says
    host = url.raw_host.decode("ascii").lower()
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

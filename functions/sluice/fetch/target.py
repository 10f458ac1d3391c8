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
from functools import cache
from typing import TYPE_CHECKING

from sluice.domain.hosts import host_key

if TYPE_CHECKING:
    import httpx
    from httpx._urlparse import ParseResult

_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]++|%[0-9A-Fa-f]{2})"
# Possessive (``++``, ``*+``): a run of safe characters is taken whole, never given back. The same URLs match,
# with the same parts (a path ends at the first "?", a query at the end), but without the engine trying each
# character as its own alternative and keeping a backtrack point for it: 2.9 instead of 3.5-13 us a URL.
_SIMPLE = re.compile(
    r"(?P<scheme>https?)://(?P<host>[a-z0-9](?:[a-z0-9.\-]{0,251}[a-z0-9])?)(?::(?P<port>[1-9][0-9]{0,4}))?"
    rf"(?P<path>/(?:{_PCHAR}|/)*+)(?:\?(?P<query>(?:{_PCHAR}|[/?])*+))?"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@cache
def _httpx_url() -> tuple[type[httpx.URL], type[ParseResult]]:
    """httpx's URL and its parts, imported by the first request, not at the module's import (a cold start
    does not load httpx). Looked up once: ``from httpx._urlparse import ...`` in the function was ~4 us a URL
    (an import statement with a name list probes the module for ``__path__`` and drops the AttributeError)."""
    import httpx
    from httpx._urlparse import ParseResult

    return httpx.URL, ParseResult


def parse_target(url: str) -> httpx.URL:
    """``httpx.URL(url)``, without httpx's parse for a canonical http(s) URL. Raises httpx.InvalidURL."""
    url_type, parts = _httpx_url()
    match = _SIMPLE.fullmatch(url) if len(url) <= 65536 else None
    if match is None:
        return url_type(url)
    scheme, host, port_text, path, query = match.group("scheme", "host", "port", "path", "query")
    port = int(port_text) if port_text is not None else None
    if (port is not None and (port > 65535 or port == _DEFAULT_PORTS[scheme])) or "/." in path or ".." in host:
        return url_type(url)  # httpx normalizes these (or refuses them): let it
    parsed = url_type.__new__(url_type)
    parsed._uri_reference = parts(scheme, "", host, port, path, query, None)
    return parsed


def target_host(url: httpx.URL) -> str:
    """:func:`sluice.domain.hosts.host_key` of ``url`` from its parsed parts (no second parse of its text)."""
    if url.port is not None and url.port > 65535:
        return host_key(str(url))  # urlsplit's port refuses it: the default port, as host_key says
    host = url.raw_host.decode("ascii").lower()
    port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

"""URL handling: resolving links as browsers do, one canonical form per page, and the crawl's scope.

Pages are written for browsers, and browsers resolve links by the WHATWG URL Standard, so links
are parsed and resolved by ada (a conformant parser; the standard's own test data is in the
suite). The canonical form adds what a crawler needs on top of the standard's serialization:
no fragment, no credentials, RFC 3986 percent-encoding normalization, then query pairs sorted,
a pair without ``=`` given one and ``%20`` in a query written ``+``.

Two links are one page when w3lib's ``canonicalize_url`` (Scrapy's dedupe) says so, with these
differences, all toward the browser the page was written for (docs/spec.md lists them):
default ports are dropped (``http://a:80/`` is ``http://a/``; w3lib keeps ``:80``), paths are
resolved and encoded by the WHATWG standard (as browsers send them), and query pairs sort by
their encoded text (``a-b=2`` before ``a=1``; w3lib sorts decoded keys) - a different order,
the same pages. A page's links are resolved, canonicalized and judged in scope in one pass with
ada, and the verdict of a URL seen before is reused (:class:`LinkJudge`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import ada_url
from ada_url._ada_wrapper import ffi as _ada_ffi  # type: ignore[import-not-found]  # ada's cffi module, untyped
from ada_url._ada_wrapper import lib as _ada

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


class LinkJudge:
    """A page's links resolved, canonicalized and judged in scope, with the verdict of each URL kept.

    The same link recurs on page after page (navigation, footers): its canonical form and whether
    it is in scope are worked out once per extractor, up to :data:`KNOWN_LINKS` URLs at a time.
    """

    __slots__ = ("_known", "_scope")

    def __init__(self, scope: Scope) -> None:
        self._scope = scope
        self._known: dict[str, tuple[str, bool]] = {}

    def judge(self, href: str | None, base_url: str) -> tuple[str, bool] | None:
        """``(canonical URL, in scope)`` of ``href`` on a page whose base is ``base_url``; None for no http(s) link."""
        if href is None:
            return None
        url = _join(base_url, href)
        if url is None:
            return None
        verdict = self._known.get(url)
        if verdict is None:
            if not url.startswith(_HTTP):
                return None
            canonical = _canonical(url)
            verdict = (canonical, self._scope.allows_link(canonical))
            if len(self._known) >= KNOWN_LINKS:
                self._known.clear()
            self._known[url] = verdict
        return verdict


KNOWN_LINKS = 16_384
"""Resolved URLs whose verdict a :class:`LinkJudge` keeps (about 3 MB at most)."""


def canonicalize_url(url: str) -> str:
    """One spelling per page: the standard's serialization with no fragment and no credentials,
    query pairs sorted, and percent-escapes of unreserved characters decoded (others upper-cased).

    Raises ValueError for a URL that is not a valid absolute http(s) URL.
    """
    href = _parse(url)
    if href is None:
        raise ValueError(f"{url[:200]!r} is not a valid URL")
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
    """``ada_url.join_url(base, href)``, None where it raises.

    ada's C API parses the base again with every link, so the common forms of a reference are
    resolved from the base parsed once (:func:`_remember_base`, kept for the last base): a
    reference whose resolution keeps its characters as they are is put together as a string
    (:data:`_PATH_CHARS`, :data:`_VERBATIM`), one with a scheme of its own is parsed alone, a
    scheme-relative one after the base's scheme. Everything else, and any base not http(s), goes
    to ada's join (:func:`_join_parsing`). A test checks the result against ``join_url`` on the
    URL Standard's cases and on generated references.
    """
    last = _last_base
    parts = last[1] if last[0] == base else _remember_base(base)
    if parts is None:
        return None
    if parts is _NOT_HTTP:
        return _join_parsing(base, href)
    origin, directory, prefix, before_query, before_fragment, scheme = parts
    if not href:
        return before_fragment
    first = href[0]
    if href.isascii() and not href.encode().translate(None, _PATH_CHARS):  # the common case: a path
        if first != "/":
            if first != "." and "/." not in href:  # no dot segment
                return prefix + href
            return _from_directory(origin, directory, href, 0, len(href)) or _join_parsing(base, href)
        if href.startswith("//"):
            return _parse(scheme + ":" + href)
        if "/." not in href:
            return origin + href
        return _from_directory(origin, "/", href, 1, len(href)) or _join_parsing(base, href)
    if first in "/\\" and len(href) > 1 and href[1] in "/\\":  # scheme-relative: the base's scheme alone
        return _parse(scheme + ":" + href)
    named = _SCHEME.match(href)
    if named is not None:
        if named.group().lower() != scheme + ":" or href.startswith("//", named.end()):
            return _parse(href)  # a scheme of its own, or the base's then "//": nothing of the base is used
        return _join_parsing(base, href)
    if first == "/":
        if (match := _VERBATIM.fullmatch(href, 1)) is not None:
            return _from_directory(origin, "/", href, 1, match.end(1)) or _join_parsing(base, href)
    elif (match := _VERBATIM.fullmatch(href)) is not None:
        if first == "?":
            return before_query + href
        if first == "#":
            return before_fragment + href
        return _from_directory(origin, directory, href, 0, match.end(1)) or _join_parsing(base, href)
    return _join_parsing(base, href)


_PATH_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=@/"
"""Characters of a path the URL Standard's path percent-encode set leaves as they are, without
``%`` (no ``%2e`` dot segment), ``:`` (no scheme) or ``\\`` (a slash in http(s) URLs)."""
_VERBATIM = re.compile(
    r"([A-Za-z0-9\-._~!$&'()*+,;=@/]*)(\?[A-Za-z0-9\-._~!$&()*+,;=@/?:%]*)?(#[A-Za-z0-9\-._~!$&'()*+,;=@/?:%]*)?"
)
"""A reference of :data:`_PATH_CHARS`, then maybe a query and a fragment of characters their
percent-encode sets leave as they are (``'`` is escaped in a query)."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_NOT_HTTP = ("", "", "", "", "", "")
_BaseParts = tuple[str, str, str, str, str, str]
_last_base: tuple[str, _BaseParts | None] = ("", None)


def _remember_base(base: str) -> _BaseParts | None:
    """``(origin, directory, origin + directory, href before the query, href before the fragment,
    scheme)`` of ``base`` parsed (None if it is not a URL, :data:`_NOT_HTTP` if not http(s)), kept
    as the last base."""
    global _last_base
    href = _parse(base)
    parts: _BaseParts | None
    if href is None:
        parts = None
    elif not href.startswith(_HTTP):
        parts = _NOT_HTTP
    else:
        cut = href.find("#")
        before_fragment = href if cut < 0 else href[:cut]
        cut = before_fragment.find("?")
        before_query = before_fragment if cut < 0 else before_fragment[:cut]
        colon = href.find(":")
        path_at = before_query.find("/", colon + 3)  # a special URL's serialization always has a path
        directory = before_query[path_at : before_query.rfind("/") + 1]
        origin = before_query[:path_at]
        parts = (origin, directory, origin + directory, before_query, before_fragment, href[:colon])
    _last_base = (base, parts)
    return parts


def _from_directory(origin: str, directory: str, href: str, at: int, path_end: int) -> str | None:
    """``href[at:]`` (a :data:`_VERBATIM` reference, its path ending at ``path_end``) resolved from
    ``directory``: each leading ``../`` drops the directory's last segment, each ``./`` nothing, and
    the rest is appended as it is. None if the rest may have a dot segment (ada's join tells)."""
    while href.startswith(".", at):
        if href.startswith("../", at):
            cut = directory.rfind("/", 0, len(directory) - 1)
            directory = directory[: cut + 1] if cut >= 0 else directory
            at += 3
        elif href.startswith("./", at):
            at += 2
        else:
            return None
    if href.find("/.", at, path_end) >= 0:
        return None
    return origin + directory + (href[at:] if at else href)


def _join_parsing(base: str, href: str) -> str | None:
    """ada's join: the base parsed again, then the reference against it. ada's C functions are
    called directly, as ``ada_url.join_url`` calls them but without its garbage-collected handle
    (see :func:`_href`)."""
    try:
        base_bytes = base.encode()
        href_bytes = href.encode()
    except UnicodeEncodeError:  # a lone surrogate: no URL, as join_url says
        return None
    return _href(_ada.ada_parse_with_base(href_bytes, len(href_bytes), base_bytes, len(base_bytes)))


def _parse(url: str) -> str | None:
    """``ada_url.URL(url).href``, None where it raises (the same direct calls as :func:`_join`)."""
    try:
        url_bytes = url.encode()
    except UnicodeEncodeError:
        return None
    return _href(_ada.ada_parse(url_bytes, len(url_bytes)))


def _href(url: Any) -> str | None:
    """The serialization of a URL ada parsed (None if it is invalid), freeing it.

    Every link of every page passes here: the wrapper's per-call ``ffi.gc`` handle and buffer copy
    cost about a third of a resolution (measured in docs/engine-experiments.md)."""
    try:
        if not _ada.ada_is_valid(url):
            return None
        href = _ada.ada_get_href(url)
        return _ada_ffi.unpack(href.data, href.length).decode() if href.length else ""
    finally:
        _ada.ada_free(url)


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
    if href.find("%", path_at) >= 0:
        href = href[:path_at] + _PERCENT.sub(_normal_escape, href[path_at:])
    query_at = href.find("?", path_at)
    if query_at >= 0:
        query = href[query_at + 1 :]
        if "%20" in query:  # a space in a query is "+" or "%20", as forms send it
            query = query.replace("%20", "+")
        pairs = sorted(pair if "=" in pair else pair + "=" for pair in query.split("&") if pair)
        href = href[:query_at] + ("?" + "&".join(pairs) if pairs else "")
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

    def allows_link(self, canonical: str) -> bool:
        """:meth:`allows` for a URL in the canonical form (what :func:`canonical_link` returns), without
        parsing it again: ada's serialization has the host lower-cased and IDNA-encoded, no
        credentials and no default port, so the host and port are read off the string."""
        start = 8 if canonical.startswith("https://") else 7
        end = canonical.find("/", start)
        authority = canonical[start:end] if end >= 0 else canonical[start:]
        if authority.startswith("["):  # an IPv6 literal: the general path
            return self.allows(canonical)
        host, colon, port = authority.rpartition(":")
        if not colon:
            host, number = authority, 443 if start == 8 else 80
        elif port.isdigit():
            number = int(port)
        else:
            return self.allows(canonical)
        if not self._host_allowed(host.rstrip("."), number):
            return False
        for pattern in self.deny:
            if pattern.search(canonical):
                return False
        return not self.allow or any(p.search(canonical) for p in self.allow)

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

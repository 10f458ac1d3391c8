"""Refuse URLs whose host resolves to an address a crawler must not reach (SSRF guard).

Limitation (DNS rebinding): :meth:`AddressGuard.check` resolves the host itself and a transport
resolves it again when it connects, so a hostile DNS answering a public address to the check and
a private one to the connector (TTL 0) passes the check. PageFetcher's default transport closes
the gap by re-checking inside its resolver (``transport.GuardedResolver``); an injected transport
(e.g. httpx's own) does not, so there the check is best effort. Through a proxy (the spec's
``request.proxy``) the same holds: the proxy resolves the target and connects to it, so the target
is checked on this fetcher's DNS answer only, and the connect-time re-check guards the proxy's own
address (which :meth:`AddressGuard.check` refuses like any other: a proxy on a private network too).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from .errors import PermanentFetchError, RetryableFetchError

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

Resolver = Callable[[str, int], Awaitable[Iterable[str]]]
"""``(host, port) -> addresses``; may raise :class:`socket.gaierror`."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``host`` (run in the loop's executor)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def origin_key(url: httpx.URL) -> str:
    """``host:port`` of a URL, host lower-cased, default port filled in."""
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host.lower()}:{port}"


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` must not be contacted, or None when it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            form, v4 = embedded
            inner = address_refusal(v4, allow_loopback=allow_loopback)
            return f"address {ip} is {inner.rsplit(' is ', 1)[1]} ({form} {v4})" if inner else None
    if ip.is_unspecified:
        return f"address {ip} is unspecified"
    if ip.is_loopback:
        return None if allow_loopback else f"address {ip} is loopback"
    if ip.is_link_local:
        return f"address {ip} is link-local"
    if ip.is_multicast:
        return f"address {ip} is multicast"
    if ip.is_reserved:
        return f"address {ip} is reserved"
    if ip.is_private:
        return f"address {ip} is private"
    if not ip.is_global:
        return f"address {ip} is not globally routable"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@lru_cache(maxsize=1024)
def _literal_refusal(host: str, allow_loopback: bool) -> tuple[str | None] | None:
    """For a literal address, (why it is refused, or None); None for a name. Cached: a host's pages ask it
    once each, and parsing the address and testing its ranges every time cost more than this look-up."""
    literal = _literal(host)
    return None if literal is None else (address_refusal(literal, allow_loopback=allow_loopback),)


class AddressGuard:
    """Checks a URL's scheme and every address its host resolves to.

    ``trusted`` names origins (``host:port``) that are not checked at all: an operator's
    explicit exception, e.g. a test site on 127.0.0.1, never a redirect target's choice.
    ``resolver`` replaces DNS (tests).
    """

    def __init__(
        self,
        allow_loopback: bool = False,
        *,
        trusted: Iterable[str] = (),
        cache_ttl_s: float = 30.0,
        cache_size: int = 4096,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.trusted = frozenset(t.lower() for t in trusted)
        self._ttl = cache_ttl_s
        self._size = cache_size
        self._resolver = resolver
        self._cache: OrderedDict[tuple[str, int], tuple[float, tuple[IPAddress, ...]]] = OrderedDict()

    async def check(self, url: str | httpx.URL) -> str | None:
        """None when ``url`` may be fetched, else the refusal reason.

        Raises :class:`RetryableFetchError`/:class:`PermanentFetchError` when the host does not resolve.
        """
        import httpx

        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except httpx.InvalidURL:
            return "invalid URL"
        if parsed.scheme not in ("http", "https"):
            return f"scheme {parsed.scheme or '(none)'} is not http(s)"
        if not parsed.host:
            return "URL has no host"
        if origin_key(parsed) in self.trusted:
            return None
        host = parsed.raw_host.decode("ascii").strip("[]")
        literal = _literal_refusal(host, self.allow_loopback)
        if literal is not None:
            return literal[0]
        default_port = 443 if parsed.scheme == "https" else 80
        for ip in await self._resolve(host, parsed.port or default_port):
            refusal = address_refusal(ip, allow_loopback=self.allow_loopback)
            if refusal is not None:
                return f"{host} resolves to {ip}: {refusal}"
        return None

    async def _resolve(self, host: str, port: int) -> tuple[IPAddress, ...]:
        key = (host.lower(), port)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            found = await self._resolver(host, port)
        except socket.gaierror as exc:
            if exc.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):
                raise RetryableFetchError(f"cannot resolve host {host}") from exc
            raise PermanentFetchError(f"host {host} not found") from exc
        addresses = tuple({ipaddress.ip_address(a.split("%", 1)[0]) for a in found})
        if not addresses:
            raise PermanentFetchError(f"host {host} not found")
        self._cache[key] = (now + self._ttl, addresses)
        self._cache.move_to_end(key)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return addresses

"""httpx transports the fetcher can run on, and the guarded aiohttp session under the default one."""

from __future__ import annotations

import ipaddress
import itertools
import socket
from collections.abc import Sequence

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import AiohttpResponseStream

from .errors import UnsafeAddressError
from .safety import AddressGuard, address_refusal


def httpx_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport:
    """httpx's own httpcore pool."""
    return httpx.AsyncHTTPTransport(limits=limits, retries=0, trust_env=False)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, refusing the addresses ``guard`` refuses: the connection goes to exactly
    the addresses that were checked, which closes the DNS-rebinding gap of a separate pre-check.
    """

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host``; raise :class:`UnsafeAddressError` if any answer is refused."""
        results = await self._inner.resolve(host, port, family)
        if f"{host.lower()}:{port}" in self._guard.trusted:
            return results
        for result in results:
            ip = ipaddress.ip_address(result["host"])
            refusal = address_refusal(ip, allow_loopback=self._guard.allow_loopback)
            if refusal is not None:
                raise UnsafeAddressError(f"{host} resolves to {ip} at connect time: {refusal}")
        return results

    async def close(self) -> None:
        """Release the inner resolver."""
        await self._inner.close()


class MappedAiohttpTransport(AiohttpTransport):
    """httpx-aiohttp's transport, also mapping the aiohttp errors it lets through (malformed answers)."""

    chunk_size = 64 * 1024

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; every aiohttp error surfaces as an httpx.TransportError."""
        try:
            response = await super().handle_async_request(request)
        except aiohttp.ClientError as exc:
            message = exc.message if isinstance(exc, aiohttp.ClientResponseError) else str(exc)
            raise httpx.RemoteProtocolError(f"malformed answer: {message}", request=request) from exc
        if isinstance(response.stream, AiohttpResponseStream):
            response.stream.CHUNK_SIZE = self.chunk_size  # fewer trips through the stream layers
        return response


def guarded_session(limits: httpx.Limits, guard: AddressGuard | None = None) -> aiohttp.ClientSession:
    """An aiohttp session: no cookie jar, no proxy from the environment, no silent resend.

    With ``guard``, addresses are re-checked when connecting (:class:`GuardedResolver`).
    """
    connector = aiohttp.TCPConnector(
        limit=limits.max_connections or 100,
        keepalive_timeout=limits.keepalive_expiry or 15.0,
        ttl_dns_cache=30,
        resolver=GuardedResolver(guard) if guard is not None else None,
    )
    session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)
    if hasattr(session, "_retry_connection"):
        # aiohttp silently resends an idempotent request once when the connection drops; retries
        # must be ours alone (counted, spaced by the domain gate, backed off).
        session._retry_connection = False
    return session


def aiohttp_transport(limits: httpx.Limits, guard: AddressGuard | None = None) -> httpx.AsyncBaseTransport:
    """httpx on top of an aiohttp connection pool (:func:`guarded_session`)."""
    return MappedAiohttpTransport(limits=limits, trust_env=False, client=lambda: guarded_session(limits, guard))


class ShardedTransport(httpx.AsyncBaseTransport):
    """Spreads requests round-robin over several small pools (httpcore's bookkeeping grows with a pool)."""

    def __init__(self, shards: Sequence[httpx.AsyncBaseTransport]) -> None:
        self._shards = list(shards)
        self._next = itertools.cycle(self._shards)

    @classmethod
    def of_httpx(cls, limits: httpx.Limits, shards: int = 8) -> ShardedTransport:
        """``shards`` httpx pools sharing ``limits.max_connections`` between them."""
        per = max(1, -(-(limits.max_connections or 100) // shards))
        expiry = limits.keepalive_expiry
        small = httpx.Limits(max_connections=per, max_keepalive_connections=per, keepalive_expiry=expiry)
        return cls([httpx_transport(small) for _ in range(shards)])

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the next shard."""
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        """Close every shard."""
        for shard in self._shards:
            await shard.aclose()


def default_transport(limits: httpx.Limits, guard: AddressGuard | None = None) -> httpx.AsyncBaseTransport:
    """The best httpx transport (:class:`~sluice.fetch.client.PageFetcher` itself, given none, skips
    httpx and speaks to the same aiohttp pool directly: ``wire.AiohttpWire``)."""
    return aiohttp_transport(limits, guard)

"""Domain errors of the fetch layer and the translation of transport exceptions into them."""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


class FetchError(Exception):
    """A page-level failure; ``reason`` is short, stable and meant for humans."""

    def __init__(self, reason: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after_s = retry_after_s


class RetryableFetchError(FetchError):
    """A failure that may go away: 503, timeout, reset, DNS hiccup."""


class DeferredFetchError(RetryableFetchError):
    """Retryable later but not within this call, e.g. while robots.txt is unreachable."""


class PermanentFetchError(FetchError):
    """A failure that will not go away by retrying: 404, oversized body, redirect loop."""


class SkipFetch(FetchError):
    """A deliberate refusal: unsafe address, robots.txt, content type."""


class UnsafeAddressError(OSError):
    """Raised inside a transport's resolver when a host resolves, at connect time, to a refused address."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _describe(exc: httpx.TransportError) -> str:
    """A short reason for a transport error, looking through the exception chain."""
    import httpx

    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    for e in chain:
        if isinstance(e, ConnectionResetError) or (isinstance(e, OSError) and e.errno == errno.ECONNRESET):
            return "connection reset"
        if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED):
            return "connection refused"
        if isinstance(e, socket.gaierror):
            return "cannot resolve host"
    # aiohttp (through httpx-aiohttp) maps every ClientConnectionError to ConnectTimeout: look at the cause.
    if names & {"ServerDisconnectedError", "ClientPayloadError"}:
        return "connection reset"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection reset" if "peer closed" in str(exc) or "disconnected" in str(exc) else "protocol error"
    if isinstance(exc, httpx.TimeoutException) and not names & {"ClientOSError", "ClientConnectorError"}:
        return "timeout"
    if isinstance(exc, httpx.ConnectError) or "ClientConnectorError" in names:
        return "cannot connect"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "connection reset"
    return "transport error"


def translate(exc: httpx.HTTPError) -> FetchError:
    """Our error for an httpx exception (raise the result ``from exc``)."""
    import httpx

    if isinstance(exc, httpx.DecodingError):
        return PermanentFetchError("undecodable body")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return SkipFetch("unsupported protocol")
    unsafe = next((e for e in _chain(exc) if isinstance(e, UnsafeAddressError)), None)
    if unsafe is not None:
        return SkipFetch(unsafe.reason)
    if isinstance(exc, httpx.TransportError):
        return RetryableFetchError(_describe(exc))
    return PermanentFetchError(f"http error: {type(exc).__name__}")

"""How PageFetcher puts one GET on the wire and reads the answer back.

:class:`AiohttpWire` (the default) speaks to a guarded aiohttp pool directly; :class:`HttpxWire`
goes through an httpx client and a given httpx transport (tests, benchmark comparisons). Both
send the same request head (same names, order and values), read raw bytes (PageFetcher decodes
them itself, under its cap) and raise httpx exceptions (or TimeoutError), so
:func:`~sluice.fetch.errors.translate` gives the same reasons whichever wire is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import aiohttp
import httpx
from httpx_aiohttp.transport import map_aiohttp_exceptions

from sluice.domain.secrets import Secret

from .body import ACCEPT_ENCODING, decode_capped, read_capped
from .credentials import Proxy

CHUNK_SIZE = 64 * 1024
"""Raw bytes asked of aiohttp per read (as ``transport.MappedAiohttpTransport`` does)."""


class Reply(Protocol):
    """An answer whose head has arrived; the body is read at most once, then :meth:`aclose` is due."""

    @property
    def status(self) -> int:
        """The HTTP status code."""
        ...

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        """The headers as received, in order."""
        ...

    async def read(
        self, content_encoding: str, cap: int, *, truncate: bool, on_raw: Callable[[int], None] | None
    ) -> bytes:
        """The decoded body, capped as :func:`~sluice.fetch.body.decode_capped` does."""
        ...

    async def aclose(self) -> None:
        """Release the connection."""
        ...


class Wire(Protocol):
    """Sends GETs with the fetcher's fixed headers (User-Agent, Accept-Encoding) plus ``headers``."""

    async def send(self, url: httpx.URL, headers: Mapping[str, str], *, via: Proxy | None = None) -> Reply:
        """Send a GET to ``url`` (through ``via``, a pool's proxy, if given); raises httpx.HTTPError (or
        TimeoutError) on failure."""
        ...

    async def aclose(self) -> None:
        """Close the pool."""
        ...


def base_headers(user_agent: str) -> dict[str, str]:
    """The headers of every request after Host, as httpx's client sends them (names lower-cased)."""
    return {"accept": "*/*", "connection": "keep-alive", "user-agent": user_agent, "accept-encoding": ACCEPT_ENCODING}


class _NoCookies(httpx.Cookies):
    """A jar that never stores anything (and skips httpx's costly Set-Cookie parsing)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        """Ignore Set-Cookie: every page is fetched statelessly."""


class _StatelessClient(httpx.AsyncClient):
    """An AsyncClient without a cookie jar: cookie handling was ~11% of the client's CPU per page."""

    _jar = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        """Always the empty, non-storing jar."""
        return self._jar

    @cookies.setter
    def cookies(self, cookies: object) -> None:
        """Cannot be set."""


class _HttpxReply:
    __slots__ = ("_response",)

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        return self._response.headers.raw

    async def read(
        self, content_encoding: str, cap: int, *, truncate: bool, on_raw: Callable[[int], None] | None
    ) -> bytes:
        return await read_capped(self._response, content_encoding, cap, truncate=truncate, on_raw=on_raw)

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxWire:
    """Requests through an httpx client (no cookies, no redirects, no proxy from the environment)."""

    def __init__(self, transport: httpx.AsyncBaseTransport, user_agent: str, timeout_s: float) -> None:
        self.transport = transport
        self._client = _StatelessClient(
            transport=transport,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": user_agent, "Accept-Encoding": ACCEPT_ENCODING},
            follow_redirects=False,
            trust_env=False,
        )

    async def send(self, url: httpx.URL, headers: Mapping[str, str], *, via: Proxy | None = None) -> Reply:
        """Send a GET through httpx, streaming the answer."""
        if via is not None:
            raise ValueError("a proxy needs the fetcher's own transport (an injected transport has its own routing)")
        client = self._client
        response = await client.send(client.build_request("GET", url, headers=headers), stream=True)
        return _HttpxReply(response)

    async def aclose(self) -> None:
        """Close the client and its transport."""
        await self._client.aclose()


class _AiohttpReply:
    __slots__ = ("_response", "raw_headers", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.raw_headers: Sequence[tuple[bytes, bytes]] = response.raw_headers

    async def read(
        self, content_encoding: str, cap: int, *, truncate: bool, on_raw: Callable[[int], None] | None
    ) -> bytes:
        # aiohttp's chunk iterator read directly (no async generator around it: one frame less a chunk); the
        # mapping covers its errors, and passes the decoder's own (PermanentFetchError) through unchanged.
        chunks = self._response.content.iter_chunked(CHUNK_SIZE)
        with map_aiohttp_exceptions():
            return await decode_capped(chunks, content_encoding, cap, truncate=truncate, on_raw=on_raw)

    async def aclose(self) -> None:
        with map_aiohttp_exceptions():
            await self._response.__aexit__(None, None, None)


class AiohttpWire:
    """Requests straight on an aiohttp session, made on first use by ``session`` (inside the loop).

    It does what ``transport.MappedAiohttpTransport`` under :class:`HttpxWire` does, minus httpx:
    the same head, no redirects, no automatic decompression, and aiohttp's exceptions mapped to the
    same httpx exceptions. Its time limit is PageFetcher's, one ``asyncio.timeout`` around each exchange.
    """

    def __init__(
        self,
        session: Callable[[], aiohttp.ClientSession],
        user_agent: str,
        timeout_s: float,
        *,
        proxy: Proxy | None = None,
    ) -> None:
        self._make_session = session
        self._session: aiohttp.ClientSession | None = None
        self._base = base_headers(user_agent)
        self._proxy = proxy.url if proxy is not None else None
        self._proxy_auth = _proxy_auth(proxy)
        # No timers of aiohttp's own: PageFetcher's asyncio.timeout(timeout_s) wraps the whole exchange (connect,
        # head, body, release) and starts first, so per-phase timeouts of the same length could never fire
        # before it; they cost a timer or two a page (the read one re-armed on every chunk received).
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None)

    async def send(self, url: httpx.URL, headers: Mapping[str, str], *, via: Proxy | None = None) -> Reply:
        """Send a GET; the head is httpx's: Host, the base headers, then ``headers`` (names lower-cased).
        ``via`` (a pool's proxy) stands in for the wire's own proxy for this request."""
        session = self._session
        if session is None:
            session = self._session = self._make_session()
        head = {"host": url.netloc.decode("ascii"), **self._base}
        for name, value in headers.items():
            head[name.lower()] = value
        tunnel = None
        proxy_url, proxy_auth = (self._proxy, self._proxy_auth) if via is None else (via.url, _proxy_auth(via))
        if proxy_auth is not None:
            # A plain-http request goes to the proxy whole, so the proxy's credentials are in its head; an
            # https one is tunnelled (CONNECT), and they go on the CONNECT alone, never to the site.
            if url.scheme == "https":
                tunnel = {"proxy-authorization": proxy_auth.reveal()}
            else:
                head["proxy-authorization"] = proxy_auth.reveal()
        try:
            with map_aiohttp_exceptions():
                response = await session.request(
                    "GET",
                    str(url),
                    headers=head,
                    allow_redirects=False,
                    auto_decompress=False,
                    compress=False,
                    timeout=self._timeout,
                    proxy=proxy_url,
                    proxy_headers=tunnel,
                ).__aenter__()
        except aiohttp.ClientError as exc:
            message = exc.message if isinstance(exc, aiohttp.ClientResponseError) else str(exc)
            raise httpx.RemoteProtocolError(f"malformed answer: {message}") from exc
        return _AiohttpReply(response)

    async def aclose(self) -> None:
        """Close the session and its pool."""
        if self._session is not None:
            await self._session.close()


def _proxy_auth(proxy: Proxy | None) -> Secret | None:
    """The Proxy-Authorization value for ``proxy``'s credentials (None without a user name), masked."""
    if proxy is None or proxy.username is None:
        return None
    return Secret(aiohttp.encode_basic_auth(proxy.username, proxy.password.reveal() if proxy.password else ""))

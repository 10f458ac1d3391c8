"""A small keep-alive HTTP/1.1 server protocol on asyncio transports (pipelining in order)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable
from typing import Protocol, cast

from .http1 import BadRequest, Request, Response, Result, Streamed, head_bytes, parse_request

log = logging.getLogger(__name__)
_NO_BODY = frozenset({204, 304})


class App(Protocol):
    """What the protocol serves: `handle` starts a request, `finished` ends it (always called)."""

    def handle(self, request: Request) -> Result | Awaitable[Result]: ...

    def finished(self, request: Request, status: int) -> None: ...

    def connected(self) -> None:
        """A connection was opened (a flow, as a VPC's flow log would record it)."""
        ...

    def transferred(self, received: int, sent: int) -> None:
        """Bytes that crossed the wire: what a NAT gateway in front of the crawler would process."""
        ...


class HttpProtocol(asyncio.Protocol):
    """One connection; answers whole-body responses inline and runs the others as a task."""

    def __init__(self, app: App, connections: set[HttpProtocol]) -> None:
        self._app = app
        self._connections = connections
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._task: asyncio.Task[None] | None = None
        self._write_paused = False
        self._read_paused = False
        self._drain: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._connections.add(self)
        self._app.connected()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._connections.discard(self)
        if self._task is not None:
            self._task.cancel()
        self._wake()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake()
        if self._task is None:
            self._process()

    def data_received(self, data: bytes) -> None:
        self._app.transferred(len(data), 0)
        self._buf += data
        if self._task is None and not self._write_paused:
            self._process()
        elif len(self._buf) > 1 << 20 and self._transport is not None and not self._read_paused:
            self._read_paused = True
            self._transport.pause_reading()

    def close(self) -> None:
        """Abort the connection (used on server shutdown)."""
        if self._transport is not None:
            self._transport.abort()

    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._write_paused and self._transport is not None:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def _process(self) -> None:
        if self._read_paused and self._transport is not None:
            self._read_paused = False
            self._transport.resume_reading()
        while self._transport is not None and self._buf and not self._write_paused and not self._transport.is_closing():
            try:
                parsed = parse_request(self._buf)
            except BadRequest as bad:
                self._write(head_bytes(bad.status, [], 0, True))
                self._transport.close()
                return
            if parsed is None:
                return
            request, used = parsed
            del self._buf[:used]
            try:
                result = self._app.handle(request)
            except Exception:
                log.exception("demo site handler failed for %s", request.target)
                result = Response(500, [], b"internal error\n")
            if isinstance(result, Response):
                self._send(request, result)
                self._app.finished(request, result.status)
                continue
            self._task = asyncio.get_running_loop().create_task(self._run(request, result))
            return

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)
            self._app.transferred(0, len(data))

    def _send(self, request: Request, response: Response) -> None:
        body = b"" if response.status in _NO_BODY else response.body
        length = -1 if response.status in _NO_BODY else len(body)
        close = not request.keep_alive
        head = head_bytes(response.status, response.headers, length, close)
        self._write(head if request.method == "HEAD" else head + body)
        if close and self._transport is not None:
            self._transport.close()

    async def _run(self, request: Request, pending: Result | Awaitable[Result]) -> None:
        status = 0
        try:
            result = await pending if inspect.isawaitable(pending) else pending
            status = result.status
            if isinstance(result, Response):
                self._send(request, result)
            else:
                await self._stream(request, result)
        except asyncio.CancelledError:
            if inspect.iscoroutine(pending):
                pending.close()
            raise
        except Exception:
            log.exception("demo site handler failed for %s", request.target)
            if status == 0:
                status = 500
                self._send(request, Response(500, [], b"internal error\n"))
            elif self._transport is not None:
                self._transport.abort()
        finally:
            self._task = None
            self._app.finished(request, status)
        if self._transport is not None and not self._write_paused:
            self._process()

    async def _stream(self, request: Request, response: Streamed) -> None:
        chunked = response.length is None
        close = not request.keep_alive
        self._write(head_bytes(response.status, response.headers, response.length, close))
        chunks = response.chunks
        try:
            if request.method != "HEAD":
                async for chunk in chunks:
                    if self._transport is None or self._transport.is_closing():
                        return
                    if chunk:
                        self._write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
                    await self.drain()
        finally:
            await chunks.aclose()
        if response.abort:
            if self._transport is not None:
                self._transport.abort()
            return
        if chunked and request.method != "HEAD":
            self._write(b"0\r\n\r\n")
        if close and self._transport is not None:
            self._transport.close()

"""HTTP/1.1 message model: request parsing and response head serialisation."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from functools import lru_cache
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

from .page import http_date

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024


class BadRequest(Exception):
    """The bytes received cannot be served; answer `status` and close."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class Request:
    """A parsed request; header names are lower-case, repeated headers are comma-joined."""

    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    keep_alive: bool
    body: bytes = b""

    @property
    def host(self) -> str:
        """Host header without port, lower-cased ('' when absent)."""
        host = self.headers.get("host", "").lower()
        if host.startswith("["):
            return host.partition("]")[0] + "]"
        return host.rpartition(":")[0] if ":" in host else host


@dataclass
class Response:
    """A response whose whole body is in memory; Content-Length is added when sent."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass
class Streamed:
    """A response whose body is produced chunk by chunk (chunked encoding when length is None)."""

    status: int
    headers: list[tuple[str, str]]
    chunks: AsyncGenerator[bytes, None]
    length: int | None = None
    abort: bool = False
    """Abort the connection (TCP reset) after the chunks instead of finishing the message."""


Result = Response | Streamed


def parse_request(buf: bytearray) -> tuple[Request, int] | None:
    """Parse one request from the start of `buf`; returns it and the bytes consumed."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise BadRequest(431)
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400)
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(400)
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if "transfer-encoding" in headers:
        raise BadRequest(501)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400) from None
    if not 0 <= length <= MAX_BODY:
        raise BadRequest(413)
    total = end + 4 + length
    if len(buf) < total:
        return None
    connection = headers.get("connection", "").lower()
    keep_alive = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    if not target.startswith("/"):
        target = urlsplit(target)._replace(scheme="", netloc="").geturl() or "/"
    path, _, qs = target.partition("?")
    query = dict(parse_qsl(qs, keep_blank_values=True)) if qs else {}
    body = bytes(buf[end + 4 : total])
    return Request(method, target, path, query, headers, keep_alive, body), total


@lru_cache(maxsize=1024)
def _status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    return f"HTTP/1.1 {status} {phrase}\r\n"


_date: list[tuple[int, str]] = [(0, "")]


def _now() -> str:
    second = int(time.time())
    cached = _date[0]
    if cached[0] != second:
        cached = (second, http_date(second))
        _date[0] = cached
    return cached[1]


def head_bytes(status: int, headers: list[tuple[str, str]], length: int | None, close: bool) -> bytes:
    """The status line and headers; length None means chunked, -1 means no length header."""
    parts = [_status_line(status), "Date: ", _now(), "\r\nServer: sluice-demosite\r\n"]
    for name, value in headers:
        parts += (name, ": ", value, "\r\n")
    if length is None:
        parts.append("Transfer-Encoding: chunked\r\n")
    elif length >= 0:
        parts += ("Content-Length: ", str(length), "\r\n")
    if close:
        parts.append("Connection: close\r\n")
    parts.append("\r\n")
    return "".join(parts).encode("latin-1", "replace")

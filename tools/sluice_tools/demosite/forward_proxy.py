"""Forward proxies on loopback, for tests of ``request.proxies``: one that works, one that walls, one that refuses.

:func:`running_proxy` serves in a thread (usable from a test's own event loop or none), speaking
HTTP/1.1 with keep-alive as a real forward proxy does: a GET in absolute form is forwarded to its
target (loopback only: the demo site), its answer passed back byte for byte. ``mode`` says what it
does instead: ``wall`` answers every request 403 itself, ``auth`` answers 407 to every request
(a proxy whose credentials were revoked), ``captcha`` answers 200 with a block page. With
``credentials``, a request without that ``Proxy-Authorization`` gets a 407.
:func:`refusing_address` is a port nobody listens on.
"""

from __future__ import annotations

import base64
import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urlsplit

Mode = Literal["forward", "wall", "auth", "captcha"]
_HOP = frozenset({"proxy-authorization", "proxy-connection", "connection", "keep-alive"})


@dataclass
class ProxyLog:
    """What a proxy saw: each request line, and each Proxy-Authorization it was given."""

    requests: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def do_GET(self) -> None:
        server = self.server
        given = self.headers.get("Proxy-Authorization") or ""
        with server.log.lock:
            server.log.requests.append(self.requestline)
            server.log.authorizations.append(given)
        if server.mode == "auth" or (server.expected is not None and given != server.expected):
            self._answer(407, [("Proxy-Authenticate", 'Basic realm="proxy"')], b"proxy authentication required\n")
            return
        if server.mode == "captcha":  # a 200 whose page is a block page (what a spec's block marker finds)
            self._answer(200, [("Content-Type", "text/html")], b"<h1>Unusual traffic from your network</h1>\n")
            return
        if server.mode == "wall":
            self._answer(403, [("Content-Type", "text/html")], b"<h1>Forbidden</h1><p>this proxy is blocked</p>\n")
            return
        target = urlsplit(self.path)
        if target.hostname != "127.0.0.1" or target.port is None:
            self._answer(502, [], b"this test proxy forwards to loopback only\n")
            return
        upstream = http.client.HTTPConnection("127.0.0.1", target.port, timeout=10)
        try:
            path = target.path + (f"?{target.query}" if target.query else "")
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            upstream.request("GET", path or "/", headers=headers)
            answer = upstream.getresponse()
            body = answer.read()  # as sent (still compressed): a proxy passes bodies through
            kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP | {"transfer-encoding"}]
            self._answer(answer.status, [(k, v) for k, v in kept if k.lower() != "content-length"], body)
        finally:
            upstream.close()

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the log is :class:`ProxyLog`."""


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: Mode, expected: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.expected = expected
        self.log = ProxyLog()


@dataclass(frozen=True)
class RunningProxy:
    port: int
    log: ProxyLog

    def url(self, credentials: tuple[str, str] | None = None) -> str:
        """Its URL, as a secret holds it: with the user name and password, if given."""
        auth = f"{credentials[0]}:{credentials[1]}@" if credentials else ""
        return f"http://{auth}127.0.0.1:{self.port}"


@contextmanager
def running_proxy(mode: Mode = "forward", credentials: tuple[str, str] | None = None) -> Iterator[RunningProxy]:
    """A forward proxy on an ephemeral loopback port until the block ends."""
    expected = "Basic " + base64.b64encode(":".join(credentials).encode()).decode() if credentials else None
    server = _ProxyServer(mode, expected)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield RunningProxy(int(server.server_address[1]), server.log)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def refusing_address() -> str:
    """``http://127.0.0.1:PORT`` where nothing listens: a connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return f"http://127.0.0.1:{port}"

"""The fixed /_test/ endpoints for narrow tests, with per-key state cleared by `reset`."""

from __future__ import annotations

import asyncio
import json
import math
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable
from urllib.parse import quote

from . import fixtures
from .faults import error_page, filler, once, trickle
from .http1 import Request, Response, Result, Streamed
from .page import HTML, Page, http_date
from .routes import page_response
from .sitemaps import GZIP, XML, sitemap_index, urlset

MAX_BOMB = 4 * 1024**3
_SAFE_URL = ":/?#[]@!$&'()*+,;=%~"


def _int(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        return default


def _float(request: Request, name: str, default: float) -> float:
    try:
        value = float(request.query.get(name, default))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


def _ok(text: str) -> Response:
    body = f"<!DOCTYPE html>\n<html><body><h1>OK</h1><p>{text}</p></body></html>\n"
    return Response(200, [("Content-Type", HTML)], body.encode())


def _redirect_to(location: str, status: int = 302) -> Response:
    return Response(status, [("Location", quote(location, safe=_SAFE_URL))])


def _compress_zeros(size: int) -> bytes:
    """gzip of `size` zero bytes: one full-flushed deflate block of 1 MiB zeros, repeated."""
    block = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    unit = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    full, rest = divmod(size, len(block))
    tail = deflate.compress(block[:rest]) + deflate.flush()
    crc = 0
    for _ in range(full):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(block[:rest], crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + unit * full + tail + struct.pack("<II", crc, size & 0xFFFFFFFF)


_STATIC = {
    "cp1252": Response(200, [("Content-Type", "text/html")], fixtures.CP1252),
    "broken-html": Response(200, [("Content-Type", HTML)], fixtures.BROKEN_HTML),
    "empty": Response(200, [("Content-Type", HTML)]),
    "json": Response(200, [("Content-Type", "application/json")], b'{"ok": true, "items": [1, 2, 3]}'),
}


class FixedEndpoints:
    """Dispatches /_test/... requests (list in `handle`); per-key state is cleared by `reset`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits: Counter[str] = Counter()
        self._bombs: dict[int, bytes] = {}
        self._etags: dict[str, Page] = {}

    def reset(self) -> None:
        """Forget the per-key counters of flaky and retry-after endpoints."""
        with self._lock:
            self._hits = Counter()

    def _hit(self, key: str) -> int:
        with self._lock:
            count = self._hits[key]
            self._hits[key] = count + 1
        return count

    def handle(self, request: Request) -> Result | Awaitable[Result]:
        """The answer to one /_test/ request. Endpoints (all GET):

        status/{code}                       that status (200..599) with a small HTML body
        flaky/{key}?fail=N&status=503       `status` for the first N requests per key, then 200
        retry-after/{key}?seconds=S&form=delta|date&status=429   once per key, then 200
        redirect?to=URL&status=302          redirect anywhere (never followed by the site)
        redirect-loop/{n}[?cycle=K]         302 to n+1 forever (or (n+1) % K)
        redirect-chain/{n}                  n redirects, then 200
        big?bytes=N&length=1|0              N streamed bytes, with/without Content-Length (chunked)
        gzip-bomb?bytes=N                   gzip body inflating to N zero bytes (cached per N)
        slow?seconds=S&bytes=B              headers at once, B body bytes in 10 pieces over S s
        reset                               headers (Content-Length 10000), then TCP abort
        cp1252 broken-html empty json headers   fixed bodies; headers echoes request headers
        etag/{key}                          stable ETag/Last-Modified; honours both validators
        long-link?chars=N                   a page linking to /_test/status/200 and to a same-site URL of N chars
        long-etag?chars=N                   a page whose ETag is N characters long; honours If-None-Match
        many-records?n=N                    a list of N items, <li>record 0</li> ... (the same names on every page)
        carry-list/{key}?n=N&pad=P          N cards linking to carry-item/{i}, each with a price i + 100 x version
                                            of key, and a filler of P characters in each card's note
        carry-item/{i}                      an item page: <h2 class="item">item i</h2>
        carry-bump/{key}                    the next version of key's prices (every price of carry-list/key + 100)
        deep?depth=N&closed=1|0             N nested <div>s (closed or not) around a link to /_test/status/200
        long-text?chars=N                   one product card whose <p class="blurb"> holds N characters
        sitemap-nest/{n}?host=H             a sitemap index of sitemap-nest/{n-1} (on host H, if given); at 0, a
                                            urlset of the first listing
        sitemap-bad?kind=broken|doctype|html   a sitemap that is no sitemap: cut off, with a DTD, or an HTML page
        sitemap-bomb?bytes=N                a gzip file (not a content coding) inflating to N zero bytes
        """
        name, _, arg = request.path.removeprefix("/_test/").partition("/")
        static = _STATIC.get(name)
        if static is not None and not arg:
            return static
        if name == "headers":
            body = json.dumps(request.headers).encode()
            return Response(200, [("Content-Type", "application/json")], body)
        handlers = {
            "status": self._status,
            "flaky": self._flaky,
            "retry-after": self._retry_after,
            "redirect": self._redirect,
            "redirect-loop": self._redirect_loop,
            "redirect-chain": self._redirect_chain,
            "big": self._big,
            "slow": self._slow,
            "reset": self._reset,
            "etag": self._etag,
            "long-link": self._long_link,
            "long-etag": self._long_etag,
            "many-records": self._many_records,
            "carry-list": self._carry_list,
            "carry-item": self._carry_item,
            "carry-bump": self._carry_bump,
            "deep": self._deep,
            "long-text": self._long_text,
            "sitemap-nest": self._sitemap_nest,
            "sitemap-bad": self._sitemap_bad,
        }
        handler = handlers.get(name)
        if handler is not None:
            return handler(request, arg)
        if name == "gzip-bomb":
            return self._gzip_bomb(request)
        if name == "sitemap-bomb":
            return self._gzip_bomb(request, file=True)
        return error_page(404, "No such test endpoint.")

    def _status(self, request: Request, arg: str) -> Result:
        code = int(arg) if arg.isdigit() else 0
        if not 200 <= code <= 599:
            return error_page(400, "status must be 200..599")
        return error_page(code, f"Status {code} as requested.")

    def _flaky(self, request: Request, arg: str) -> Result:
        count = self._hit("flaky/" + arg)
        if count < _int(request, "fail", 1):
            return error_page(_int(request, "status", 503), f"Failure {count + 1} for {arg}.")
        return _ok(f"flaky {arg} succeeded after {count} failures")

    def _retry_after(self, request: Request, arg: str) -> Result:
        if self._hit("retry-after/" + arg):
            return _ok(f"retry-after {arg} succeeded")
        seconds = _float(request, "seconds", 1.0)
        date = request.query.get("form") == "date"
        value = http_date(time.time() + seconds) if date else str(math.ceil(seconds))
        return error_page(_int(request, "status", 429), "Slow down.", [("Retry-After", value)])

    def _redirect(self, request: Request, arg: str) -> Result:
        target = request.query.get("to")
        if not target:
            return error_page(400, "redirect needs ?to=URL")
        status = _int(request, "status", 302)
        return _redirect_to(target, status if status in (301, 302, 303, 307, 308) else 302)

    def _redirect_loop(self, request: Request, arg: str) -> Result:
        n = int(arg) if arg.isdigit() else 0
        cycle = _int(request, "cycle", 0)
        following = (n + 1) % cycle if cycle > 0 else n + 1
        suffix = f"?cycle={cycle}" if cycle > 0 else ""
        return _redirect_to(f"/_test/redirect-loop/{following}{suffix}")

    def _redirect_chain(self, request: Request, arg: str) -> Result:
        n = int(arg) if arg.isdigit() else 0
        return _redirect_to(f"/_test/redirect-chain/{n - 1}") if n > 0 else _ok("end of chain")

    def _big(self, request: Request, arg: str) -> Result:
        size = max(0, _int(request, "bytes", 1024 * 1024))
        length = size if request.query.get("length", "1") != "0" else None
        return Streamed(200, [("Content-Type", HTML)], filler(size), length)

    async def _gzip_bomb(self, request: Request, *, file: bool = False) -> Result:
        size = min(max(0, _int(request, "bytes", 100 * 1024 * 1024)), MAX_BOMB)
        body = self._bombs.get(size)
        if body is None:
            body = await asyncio.get_running_loop().run_in_executor(None, _compress_zeros, size)
            self._bombs[size] = body
        headers = [("Content-Type", GZIP)] if file else [("Content-Type", HTML), ("Content-Encoding", "gzip")]
        return Response(200, headers, body)

    def _sitemap_nest(self, request: Request, arg: str) -> Result:
        n = int(arg) if arg.isdigit() else 0
        base = f"http://{request.headers.get('host', '127.0.0.1')}"
        child = f"http://{request.query['host']}" if request.query.get("host") else base
        if n > 0:
            return Response(200, [("Content-Type", XML)], sitemap_index([(f"{child}/_test/sitemap-nest/{n - 1}", 0)]))
        return Response(200, [("Content-Type", XML)], urlset([(f"{base}/catalogue/page-1.html", 0)]))

    def _sitemap_bad(self, request: Request, arg: str) -> Result:
        kind = request.query.get("kind", "broken")
        bodies = {
            "broken": b'<?xml version="1.0"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n<url><loc>x',
            "doctype": b'<?xml version="1.0"?>\n<!DOCTYPE urlset [<!ENTITY a "aaaaaaaa">]>\n<urlset>&a;</urlset>',
            "html": b"<!DOCTYPE html>\n<html><body><p>Page not found</p></body></html>",
        }
        body = bodies.get(kind)
        if body is None:
            return error_page(400, "kind must be broken, doctype or html")
        return Response(200, [("Content-Type", HTML if kind == "html" else XML)], body)

    def _slow(self, request: Request, arg: str) -> Result:
        seconds = _float(request, "seconds", 1.0)
        size = max(0, _int(request, "bytes", 2000))
        body = (b"<html><body>" + b"s" * size)[:size]
        return Streamed(200, [("Content-Type", HTML)], trickle(body, seconds), len(body))

    def _reset(self, request: Request, arg: str) -> Result:
        return Streamed(200, [("Content-Type", HTML)], once(b""), 10_000, abort=True)

    def _long_link(self, request: Request, arg: str) -> Result:
        chars = max(32, min(_int(request, "chars", 3000), 100_000))
        target = "/_test/status/200?pad="
        long = target + "a" * (chars - len(target) - len("http://127.0.0.1:65535"))
        return _ok(f'<a href="/_test/status/200">short</a> <a href="{long}">long</a>')

    def _long_etag(self, request: Request, arg: str) -> Result:
        chars = max(8, min(_int(request, "chars", 2000), 6000))
        etag = '"' + "e" * (chars - 2) + '"'
        if request.headers.get("if-none-match") == etag:
            return Response(304, [("ETag", etag)])
        body = b"<!DOCTYPE html>\n<html><body><p>a page with a long ETag</p></body></html>\n"
        return Response(200, [("Content-Type", HTML), ("ETag", etag)], body)

    def _many_records(self, request: Request, arg: str) -> Result:
        n = max(0, min(_int(request, "n", 100), 100_000))
        return _ok("<ul>" + "".join(f"<li>record {i}</li>" for i in range(n)) + "</ul>")

    def _carry_list(self, request: Request, arg: str) -> Result:
        n = max(0, min(_int(request, "n", 100), 100_000))
        pad = "x" * max(0, min(_int(request, "pad", 0), 2_000_000))
        with self._lock:
            version = self._hits["carry-bump/" + arg]
        cards = "".join(
            f'<li class="card"><a href="/_test/carry-item/{i}">item {i}</a>'
            f'<span class="price">{i + 100 * version}</span><span class="note">{pad}</span></li>'
            for i in range(n)
        )
        return _ok(f"<ul>{cards}</ul>")

    def _carry_item(self, request: Request, arg: str) -> Result:
        n = int(arg) if arg.isdigit() else 0
        body = f'<!DOCTYPE html>\n<html><body><h2 class="item">item {n}</h2></body></html>\n'
        return Response(200, [("Content-Type", HTML)], body.encode())

    def _carry_bump(self, request: Request, arg: str) -> Result:
        return _ok(f"version {self._hit('carry-bump/' + arg) + 1}")

    def _deep(self, request: Request, arg: str) -> Result:
        depth = max(0, min(_int(request, "depth", 100_000), 1_000_000))
        closing = "</div>" * depth if request.query.get("closed", "1") != "0" else ""
        body = (
            f'<!DOCTYPE html>\n<html><body>{"<div>" * depth}<a href="/_test/status/200">in</a>{closing}</body></html>'
        )
        return Response(200, [("Content-Type", HTML)], body.encode())

    def _long_text(self, request: Request, arg: str) -> Result:
        chars = max(0, min(_int(request, "chars", 1_000_000), 4_000_000))
        card = (
            '<article class="product_pod"><h3><a href="long.html" title="Long">Long</a></h3>'
            '<p class="price_color">£1.00</p><p class="star-rating One"></p>'
            f'<p class="blurb">{"ab " * (chars // 3)}</p>'
            "</article>"
        )
        return _ok(card)

    def _etag(self, request: Request, arg: str) -> Result:
        page = self._etags.get(arg)
        if page is None:
            text = f"<!DOCTYPE html>\n<html><body><p>etag resource {arg}</p></body></html>\n"
            page = self._etags.setdefault(arg, Page.html(text))
        return page_response(page, request)

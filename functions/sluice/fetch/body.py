"""Reading a response body with a cap on DECODED bytes that also bounds memory (gzip bombs).

We decode ``gzip``/``deflate`` ourselves from the raw stream with ``zlib``'s ``max_length``, so a
bomb never inflates more than the cap plus one byte, whatever the chunk size of the transport.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, Callable
from typing import TYPE_CHECKING

from .errors import PermanentFetchError

if TYPE_CHECKING:
    import httpx

ACCEPT_ENCODING = "gzip, deflate"


class _Decoder:
    """Decodes one content coding, never producing more than asked for per call."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._first = True
        self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS)

    def decode(self, data: bytes, limit: int) -> bytes:
        """Up to ``limit`` decoded bytes from ``data`` (the caller stops when it gets ``limit``)."""
        if self.coding == "identity":
            return data[:limit]
        try:
            out = self._zlib.decompress(data, limit)
        except zlib.error:
            if not (self._first and self.coding == "deflate"):
                raise
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
            out = self._zlib.decompress(data, limit)
        self._first = False
        return out


def _decoder(content_encoding: str) -> _Decoder:
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Decoder("identity")
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return _Decoder(codings[0])
    raise PermanentFetchError(f"content-encoding {', '.join(codings)} not supported")


async def read_capped(
    response: httpx.Response,
    content_encoding: str,
    cap: int,
    *,
    truncate: bool = False,
    on_raw: Callable[[int], None] | None = None,
) -> bytes:
    """The decoded body; over ``cap`` it raises, or truncates if asked. ``on_raw`` sees raw chunk sizes."""
    if response.is_stream_consumed:  # a transport that hands back an already read response
        body = response.content
        if len(body) > cap and not truncate:
            raise PermanentFetchError(f"body over {cap} bytes")
        return body[:cap]
    return await decode_capped(response.aiter_raw(), content_encoding, cap, truncate=truncate, on_raw=on_raw)


async def decode_capped(
    chunks: AsyncIterable[bytes],
    content_encoding: str,
    cap: int,
    *,
    truncate: bool = False,
    on_raw: Callable[[int], None] | None = None,
) -> bytes:
    """The decoded body of the raw ``chunks``; over ``cap`` it raises, or truncates if asked."""
    decoder = _decoder(content_encoding)
    parts: list[bytes] = []
    total = 0
    try:
        async for chunk in chunks:
            if on_raw is not None:
                on_raw(len(chunk))
            out = decoder.decode(chunk, cap - total + 1)
            total += len(out)
            parts.append(out)
            if total > cap:
                break  # output below the limit means zlib consumed all input: nothing is held back
    except zlib.error as exc:
        raise PermanentFetchError(f"undecodable {decoder.coding} body") from exc
    if total > cap:
        if not truncate:
            raise PermanentFetchError(f"body over {cap} bytes")
        return b"".join(parts)[:cap]
    return b"".join(parts)

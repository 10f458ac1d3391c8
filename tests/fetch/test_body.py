"""Bounded body reading: the cap is on decoded bytes and also bounds memory for gzip bombs."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import httpx
import pytest

from sluice.fetch.body import read_capped
from sluice.fetch.errors import PermanentFetchError

pytestmark = pytest.mark.anyio
MB = 1024 * 1024


def streamed(body: bytes, encoding: str = "", chunk: int = 64 * 1024) -> httpx.Response:
    chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    headers = {"content-encoding": encoding} if encoding else {}

    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            for c in chunks:
                yield c

    return httpx.Response(200, headers=headers, stream=Stream())


async def test_identity_body_under_and_over_the_cap() -> None:
    assert await read_capped(streamed(b"x" * 5000), "", 5000) == b"x" * 5000
    with pytest.raises(PermanentFetchError, match="body over 4999 bytes"):
        await read_capped(streamed(b"x" * 5000), "", 4999)
    assert await read_capped(streamed(b"x" * 5000), "", 4000, truncate=True) == b"x" * 4000


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "raw-deflate"])
async def test_decodes_gzip_and_both_deflate_flavours(encoding: str) -> None:
    body = b"<p>hello</p>" * 1000
    if encoding == "raw-deflate":
        packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        data, encoding = packer.compress(body) + packer.flush(), "deflate"
    else:
        data = gzip.compress(body) if "gzip" in encoding else zlib.compress(body)
    assert await read_capped(streamed(data, encoding, chunk=100), encoding, MB) == body


async def test_gzip_bomb_is_stopped_at_the_cap_without_inflating_it() -> None:
    bomb = gzip.compress(bytes(64 * MB), compresslevel=9)  # ~64 KB on the wire
    raw: list[int] = []
    tracemalloc.start()
    try:
        with pytest.raises(PermanentFetchError, match="body over 1048576 bytes"):
            await read_capped(streamed(bomb, "gzip", chunk=16 * 1024), "gzip", MB, on_raw=raw.append)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MB  # one 16 KiB chunk of this bomb alone inflates to ~16 MB
    assert raw == [16 * 1024]  # stopped after the first chunk


async def test_unsupported_or_broken_encodings_are_permanent() -> None:
    with pytest.raises(PermanentFetchError, match="content-encoding br not supported"):
        await read_capped(streamed(b"abc", "br"), "br", MB)
    with pytest.raises(PermanentFetchError, match="undecodable gzip body"):
        await read_capped(streamed(b"not gzip at all", "gzip"), "gzip", MB)

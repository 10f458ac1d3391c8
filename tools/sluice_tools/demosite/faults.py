"""Deterministic fault injection and the streamed bodies used by faults and test endpoints.

Rule: the k-th request (k = 0, 1, ... counted per path since the last reset) to a faultable
path draws u = blake2b("{fault_seed}|{path}|{k}") / 2**64 in [0, 1). Only the first
`faulty_attempts` requests of a path may fault (None: all). The fault is picked by comparing u
with the cumulative fractions in this order: 503, 429, reset, slow body, oversized; otherwise
the request is served normally. So a given (config, request sequence) always faults the same
way, and with faulty_attempts=3 the fourth request to any path always succeeds.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
from collections.abc import AsyncGenerator

from .config import DemoSiteConfig
from .http1 import Response, Result, Streamed
from .page import HTML


class Fault(enum.Enum):
    """What happens to one request."""

    NONE = "none"
    UNAVAILABLE = "503"
    TOO_MANY = "429"
    RESET = "reset"
    SLOW = "slow"
    OVERSIZED = "oversized"


def draw(seed: int, path: str, attempt: int) -> float:
    """The deterministic uniform number in [0, 1) of one attempt at one path."""
    digest = hashlib.blake2b(f"{seed}|{path}|{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def choose(config: DemoSiteConfig, path: str, attempt: int) -> Fault:
    """The fault (or NONE) for the `attempt`-th request (0-based) to `path`."""
    if config.faulty_attempts is not None and attempt >= config.faulty_attempts:
        return Fault.NONE
    table = (
        (Fault.UNAVAILABLE, config.fail_503_fraction),
        (Fault.TOO_MANY, config.fail_429_fraction),
        (Fault.RESET, config.reset_fraction),
        (Fault.SLOW, config.slow_body_fraction),
        (Fault.OVERSIZED, config.oversized_fraction),
    )
    if not any(fraction for _, fraction in table):
        return Fault.NONE
    u = draw(config.fault_seed, path, attempt)
    edge = 0.0
    for fault, fraction in table:
        edge += fraction
        if u < edge:
            return fault
    return Fault.NONE


async def once(data: bytes) -> AsyncGenerator[bytes, None]:
    """A body of one chunk."""
    yield data


async def trickle(data: bytes, seconds: float, pieces: int = 10) -> AsyncGenerator[bytes, None]:
    """`data` in `pieces` chunks, sleeping seconds/pieces before each one."""
    step = max(1, -(-len(data) // pieces))
    for start in range(0, max(len(data), 1), step):
        await asyncio.sleep(seconds / pieces)
        yield data[start : start + step]


_FILL = (b"<p>" + b"x" * 1017 + b"</p>\n") * 64


async def filler(size: int) -> AsyncGenerator[bytes, None]:
    """`size` bytes of HTML-ish filler in 64 KiB chunks, never held in memory at once."""
    sent = 0
    while sent < size:
        chunk = _FILL[: min(len(_FILL), size - sent)]
        sent += len(chunk)
        yield chunk


def error_page(status: int, text: str, headers: list[tuple[str, str]] | None = None) -> Response:
    """A small HTML error answer."""
    body = f"<!DOCTYPE html>\n<html><body><h1>{status}</h1><p>{text}</p></body></html>\n"
    return Response(status, [("Content-Type", HTML), *(headers or [])], body.encode())


def apply(fault: Fault, config: DemoSiteConfig, normal: Response) -> Result:
    """The answer to send instead of `normal` under `fault`."""
    if fault is Fault.UNAVAILABLE:
        return error_page(503, "Service temporarily unavailable (injected).")
    if fault is Fault.TOO_MANY:
        retry = [("Retry-After", str(config.retry_after_seconds))]
        return error_page(429, "Too many requests (injected).", retry)
    if fault is Fault.OVERSIZED:
        headers = [("Content-Type", HTML)]
        return Streamed(200, headers, filler(config.oversized_bytes), config.oversized_bytes)
    body = normal.body
    if fault is Fault.RESET:
        return Streamed(normal.status, normal.headers, once(body[: len(body) // 2]), len(body), True)
    if fault is Fault.SLOW:
        chunks = trickle(body, config.slow_body_seconds)
        return Streamed(normal.status, normal.headers, chunks, len(body))
    return normal

"""Fixtures for the fetch-layer tests: hermetic DNS, tiny retry policies, mock-transport fetchers."""

from __future__ import annotations

import socket
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import httpx
import pytest

from sluice.fetch import AddressGuard, PageFetcher
from sluice.fetch.safety import Resolver
from sluice.spec import Politeness, RetryPolicy

HOSTS = {
    "example.com": ["93.184.216.34"],
    "other.example": ["93.184.216.35"],
    "third.example": ["2606:2800:220:1::1"],
    "evil.example": ["93.184.216.34", "10.0.0.7"],
    "meta.example": ["169.254.169.254"],
    "mapped.example": ["::ffff:127.0.0.1"],
}

Handler = Callable[[httpx.Request], httpx.Response] | Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]
PolitenessFactory = Callable[..., Politeness]
FetcherFactory = Callable[..., PageFetcher]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is bounded in time (pytest-timeout)."""
    for item in items:
        if "tests/fetch" in str(item.path):
            item.add_marker(pytest.mark.timeout(60))


@pytest.fixture
def anyio_backend() -> str:
    """The fetch layer is asyncio-only."""
    return "asyncio"


async def _fake_resolver(host: str, port: int) -> Iterable[str]:
    if host not in HOSTS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return HOSTS[host]


@pytest.fixture
def fake_dns() -> Resolver:
    """A DNS that only knows HOSTS (no network)."""
    return _fake_resolver


def _quick(**overrides: Any) -> Politeness:
    retry = overrides.pop("retry", None) or RetryPolicy(
        times=2, backoff_base_seconds=0.001, backoff_max_seconds=0.005, retry_after_max_seconds=5
    )
    values: dict[str, Any] = {"obey_robots": False, "timeout_seconds": 5, "retry": retry}
    values.update(overrides)
    return Politeness(**values)


@pytest.fixture
def quick() -> PolitenessFactory:
    """Politeness with millisecond backoffs (retries cost no time); robots off unless asked."""
    return _quick


@pytest.fixture
def mock_fetcher() -> FetcherFactory:
    """``mock_fetcher(handler, **politeness)``: a PageFetcher on httpx.MockTransport and the fake DNS."""

    def make(handler: Handler, **overrides: Any) -> PageFetcher:
        guard = AddressGuard(resolver=_fake_resolver)
        return PageFetcher(_quick(**overrides), transport=httpx.MockTransport(handler), guard=guard)

    return make


def page(status: int = 200, body: bytes = b"<p>ok</p>", headers: dict[str, str] | None = None) -> httpx.Response:
    """A response whose body is streamed (not pre-read), like a real transport's."""
    merged = {"content-type": "text/html; charset=utf-8", **(headers or {})}
    return httpx.Response(status, headers=merged, stream=httpx.ByteStream(body))


@pytest.fixture
def respond() -> Callable[..., httpx.Response]:
    """``respond(status, body, headers)``: a streamed mock response (text/html unless overridden)."""
    return page

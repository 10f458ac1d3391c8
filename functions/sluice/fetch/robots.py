"""robots.txt per origin (RFC 9309): fetched once, shared by concurrent callers, cached."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from protego import Protego

from .errors import DeferredFetchError

if TYPE_CHECKING:
    import httpx

ROBOTS_MAX_BYTES = 512 * 1024
"""RFC 9309 asks parsers to read at least 500 KiB; the rest of a longer file is ignored."""


@dataclass(frozen=True, slots=True)
class RobotsResponse:
    """What a loader got for a robots.txt: a status and body, or no status and an ``error``.

    A ``permanent`` error (too many redirects, unsafe redirect) means "unavailable": allow all.
    """

    status: int | None
    body: bytes = b""
    error: str | None = None
    permanent: bool = False


RobotsLoader = Callable[[str], Awaitable[RobotsResponse]]


class RobotsStore(Protocol):
    """robots.txt answers shared by every fetcher of a run, so a site sees its robots.txt asked once."""

    async def get(self, robots_url: str) -> RobotsResponse | None:
        r"""The answer another fetcher got, or None: then the caller fetches it and :meth:`put`\ s it."""
        ...

    async def put(self, robots_url: str, answer: RobotsResponse) -> None: ...


@dataclass(frozen=True, slots=True)
class _Rules:
    parser: Protego | None
    refusal: str | None
    """Set when the whole origin is disallowed because robots.txt was unreachable."""
    expires: float


def robots_url(url: str | httpx.URL) -> str:
    """The robots.txt URL that governs ``url``."""
    import httpx

    parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    host = parsed.raw_host.decode("ascii")
    host = f"[{host}]" if ":" in host else host
    port = parsed.port
    default = 443 if parsed.scheme == "https" else 80
    return f"{parsed.scheme}://{host}{'' if port in (None, default) else f':{port}'}/robots.txt"


class RobotsCache:
    """Answers "may this user agent fetch this URL", loading each origin's robots.txt once.

    2xx: parsed rules; 4xx (but 429) or unavailable: allow all; 429, 5xx or unreachable:
    disallow all, for ``failure_ttl_s`` only, so an outage does not block the origin for the run.
    """

    def __init__(
        self,
        loader: RobotsLoader,
        *,
        ttl_s: float = 24 * 3600.0,
        failure_ttl_s: float = 300.0,
        max_entries: int = 10_000,
        max_crawl_delay_s: float = 300.0,
    ) -> None:
        self._loader = loader
        self._ttl = ttl_s
        self._failure_ttl = failure_ttl_s
        self._max_entries = max_entries
        self._max_crawl_delay = max_crawl_delay_s
        self._rules: OrderedDict[str, _Rules] = OrderedDict()
        self._pending: dict[str, asyncio.Task[_Rules]] = {}
        self.fetches = 0

    async def check(self, url: str | httpx.URL, user_agent: str) -> str | None:
        """None when robots.txt lets ``user_agent`` fetch ``url``, else the reason it does not.

        Raises :class:`DeferredFetchError` while the origin's robots.txt is unreachable.
        """
        rules = await self._load(robots_url(url))
        if rules.refusal is not None:
            raise DeferredFetchError(rules.refusal)
        if rules.parser is not None and not rules.parser.can_fetch(str(url), user_agent):
            return "robots.txt disallows"
        return None

    async def allowed(self, url: str | httpx.URL, user_agent: str) -> bool:
        """Whether robots.txt lets ``user_agent`` fetch ``url`` (False while it is unreachable)."""
        try:
            return await self.check(url, user_agent) is None
        except DeferredFetchError:
            return False

    async def sitemaps(self, url: str | httpx.URL) -> list[str]:
        """The ``Sitemap:`` lines of the robots.txt that governs ``url``, as written (none when it has none).

        Raises :class:`DeferredFetchError` while the origin's robots.txt is unreachable.
        """
        rules = await self._load(robots_url(url))
        if rules.refusal is not None:
            raise DeferredFetchError(rules.refusal)
        return list(rules.parser.sitemaps) if rules.parser is not None else []

    def crawl_delay(self, url: str | httpx.URL, user_agent: str) -> float | None:
        """The Crawl-delay for ``url``'s origin (capped), if its robots.txt is loaded and sets one."""
        rules = self._rules.get(robots_url(url))
        if rules is None or rules.parser is None:
            return None
        delay = rules.parser.crawl_delay(user_agent)
        return None if delay is None else min(float(delay), self._max_crawl_delay)

    async def aclose(self) -> None:
        """Cancel robots.txt fetches still under way (their callers see CancelledError)."""
        pending = list(self._pending.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _load(self, key: str) -> _Rules:
        rules = self._rules.get(key)
        if rules is not None and rules.expires > time.monotonic():
            return rules
        task = self._pending.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._fetch(key))
            self._pending[key] = task
        return await asyncio.shield(task)

    async def _fetch(self, key: str) -> _Rules:
        try:
            self.fetches += 1
            rules = self._interpret(await self._loader(key))
            self._rules[key] = rules
            self._rules.move_to_end(key)
            while len(self._rules) > self._max_entries:
                self._rules.popitem(last=False)
            return rules
        finally:
            del self._pending[key]

    def _interpret(self, answer: RobotsResponse) -> _Rules:
        now = time.monotonic()
        status = answer.status
        if status is None and answer.permanent:
            return _Rules(None, None, now + self._ttl)
        if status is None or status == 429 or status >= 500:
            why = answer.error or f"http {status}"
            return _Rules(None, f"robots.txt unreachable ({why}): origin disallowed", now + self._failure_ttl)
        if status >= 400:
            return _Rules(None, None, now + self._ttl)
        text = answer.body[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace") if 200 <= status < 300 else ""
        return _Rules(Protego.parse(text), None, now + self._ttl)

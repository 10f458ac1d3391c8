"""A crawl's proxy pool at run time: which proxy a host's request goes through, tiers, and health.

Built once per container from ``request.proxies`` (:func:`resolve_pool`); each proxy's URL is read
from its secret and split like ``request.proxy``'s (:class:`~sluice.fetch.credentials.Proxy`: the
address apart, the credentials in a :class:`~sluice.domain.secrets.Secret`). Nothing here ever
names a proxy by anything but its spec name.

- **Rotation**: ``sticky`` gives a host the same healthy proxy of its tier for the run (chosen by a
  hash of the host, so every container picks the same one); ``round_robin`` the next one each request.
- **Tiers**: a host starts on the lowest; :meth:`ProxyPool.escalate` moves it up when the breaker or a
  block marker trips there (``PageFetcher`` calls it). A tier with no healthy proxy left is skipped.
- **Health**: a proxy is ejected for the run when it answers 407, cannot be connected to, or has
  answered only 403s (:data:`WALL_ANSWERS` of them, whatever the host). Each URL's route (the proxy
  that answered, and the proxies that failed on it) is kept until the page's result takes it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit, urlunsplit

from sluice.domain.pages import PageResult
from sluice.domain.secrets import Secret, SecretUnavailable
from sluice.spec.proxies import ProxyRotation
from sluice.spec.request import RequestSpec, proxy_problem

from .credentials import Proxy

WALL_ANSWERS = 3
"""A proxy whose first answers are this many 403s, and nothing else, walls the crawl off: ejected."""
PROXY_AUTH_REQUIRED = 407


@dataclass(frozen=True, slots=True)
class PoolProxy:
    """One proxy of the pool: its spec name and tier, and where it is (credentials masked)."""

    name: str
    tier: int
    proxy: Proxy


@dataclass(frozen=True, slots=True)
class ProxyFailure:
    """A proxy that failed one URL's request: why, and whether that ejected it."""

    proxy: str
    reason: str
    ejected: bool


@dataclass(slots=True)
class Route:
    """What one URL's fetch went through: the proxy that answered it, and those that failed it."""

    proxy: str | None = None
    tier: int | None = None
    failures: list[ProxyFailure] = field(default_factory=list)
    walled_by: set[str] = field(default_factory=set)
    """Proxies that answered this URL 403 while another might not: the next attempt avoids them."""


@dataclass(slots=True)
class _Health:
    answers: int = 0
    walls: int = 0
    ejected: str | None = None


class ProxyPool:
    """The pool's state in one fetcher: hosts' tiers and sticky proxies, each proxy's health, each URL's route."""

    def __init__(self, proxies: Sequence[PoolProxy], rotation: ProxyRotation = "sticky") -> None:
        if not proxies:
            raise ValueError("a proxy pool holds at least one proxy")
        self.rotation = rotation
        self.proxies = list(proxies)
        self.tiers = sorted({p.tier for p in proxies})
        self._by_tier = {t: [p for p in proxies if p.tier == t] for t in self.tiers}
        self._health = {p.name: _Health() for p in proxies}
        self._host_tier: dict[str, int] = {}
        """A host's tier as an index into ``tiers`` (absent: the lowest)."""
        self._sticky: dict[str, str] = {}
        self._turn = itertools.count()
        self._routes: dict[str, Route] = {}
        self._orphans: list[ProxyFailure] = []

    # -- choosing --------------------------------------------------------------------------------

    def choose(self, host: str, url: str) -> PoolProxy | None:
        """The proxy ``url``'s request to ``host`` goes through; None when every proxy of its tier and above is out."""
        avoid = self._routes[url].walled_by if url in self._routes else set()
        for index in range(self._host_tier.get(host, 0), len(self.tiers)):
            healthy = [p for p in self._by_tier[self.tiers[index]] if self._health[p.name].ejected is None]
            if not healthy:
                continue
            if index != self._host_tier.get(host, 0):
                self._host_tier[host] = index  # its tier is out: the host moves up for the run
            others = [p for p in healthy if p.name not in avoid]
            if self.rotation == "round_robin":
                choices = others or healthy
                return choices[next(self._turn) % len(choices)]
            # Sticky: the host keeps its proxy while it is healthy (a 403 on one URL does not move the host:
            # that URL alone tries another, and a proxy that walls everything is ejected soon enough).
            current = next((p for p in healthy if p.name == self._sticky.get(host)), None)
            if current is None:
                current = healthy[_spread(host, len(healthy))]
                self._sticky[host] = current.name
            if current.name not in avoid or not others:
                return current
            return others[_spread(host, len(others))]
        return None

    def tier_of(self, host: str) -> int:
        """The tier ``host``'s requests go through now."""
        return self.tiers[self._host_tier.get(host, 0)]

    def escalate(self, host: str) -> int | None:
        """Move ``host`` to the next tier for the run (the breaker or a block marker tripped); its new tier,
        or None when it is on the last one."""
        index = self._host_tier.get(host, 0)
        if index + 1 >= len(self.tiers):
            return None
        self._host_tier[host] = index + 1
        self._sticky.pop(host, None)
        return self.tiers[index + 1]

    # -- health ----------------------------------------------------------------------------------

    def failed(self, url: str, chosen: PoolProxy, reason: str) -> None:
        """``chosen`` could not carry ``url``'s request (407, no connection): ejected for the run."""
        health = self._health[chosen.name]
        first = health.ejected is None
        if first:
            health.ejected = reason
        self._route(url).failures.append(ProxyFailure(chosen.name, reason, first))

    def answered(self, url: str, chosen: PoolProxy, status: int) -> bool:
        """``chosen`` carried ``url``'s request and the site (or the proxy) answered ``status``.

        True when the answer is a 403 another healthy proxy of the tier may not give: the caller
        retries the URL (the next attempt avoids this proxy). A proxy that has answered nothing but
        403s, :data:`WALL_ANSWERS` times, is ejected: it walls every host off."""
        health = self._health[chosen.name]
        route = self._route(url)
        health.answers += 1
        if status != 403:
            route.proxy, route.tier = chosen.name, chosen.tier
            return False
        health.walls += 1
        if health.ejected is None and health.walls == health.answers and health.walls >= WALL_ANSWERS:
            health.ejected = f"403 on every answer ({health.walls} of {health.answers})"
            route.failures.append(ProxyFailure(chosen.name, health.ejected, True))
        else:
            route.failures.append(ProxyFailure(chosen.name, "403", False))
        others = [
            p
            for p in self._by_tier[chosen.tier]
            if p.name != chosen.name and p.name not in route.walled_by and self._health[p.name].ejected is None
        ]
        route.walled_by.add(chosen.name)
        if others:
            return True
        route.proxy, route.tier = chosen.name, chosen.tier
        return False

    @property
    def empty(self) -> bool:
        """Every proxy is ejected: no request can go out."""
        return all(h.ejected is not None for h in self._health.values())

    def ejected(self) -> dict[str, str]:
        """Each ejected proxy's reason, by name."""
        return {name: h.ejected for name, h in self._health.items() if h.ejected is not None}

    # -- routes ----------------------------------------------------------------------------------

    def take_route(self, url: str) -> Route | None:
        """What ``url``'s fetch went through (forgotten here once taken), with the failures of requests that
        have no result of their own (robots.txt) since the last route taken: an ejection is always reported."""
        route = self._routes.pop(url, None)
        if self._orphans:
            route = route or Route()
            route.failures[:0] = self._orphans
            self._orphans.clear()
        return route

    def drop_route(self, url: str) -> None:
        """Forget ``url``'s route (a request whose result is not a page's), keeping its failures for the next."""
        route = self._routes.pop(url, None)
        if route is not None:
            self._orphans += route.failures

    def _route(self, url: str) -> Route:
        route = self._routes.get(url)
        if route is None:
            route = self._routes[url] = Route()
        return route


def proxy_failure(exc: Exception) -> str:
    """Why a proxy could not carry a request, in our words (an aiohttp message may name its address)."""
    status = re.match(r"\s*(\d{3}),", str(exc))
    if status is not None and int(status.group(1)) == PROXY_AUTH_REQUIRED:
        return "407 proxy authentication required"
    if status is not None:
        return f"tunnel refused: {status.group(1)}"
    return "connect failed"


def with_route(result: PageResult, route: Route | None) -> PageResult:
    """``result`` saying which proxy answered its page and which failed it (unchanged without a pool)."""
    if route is None:
        return result
    failures = tuple((f.proxy, f.reason, f.ejected) for f in route.failures)
    return replace(result, proxy=route.proxy, proxy_tier=route.tier, proxy_failures=failures)


def _spread(host: str, n: int) -> int:
    """The same index of ``n`` for ``host`` in every container: a host's sticky proxy does not depend on who asks."""
    return int.from_bytes(hashlib.sha256(host.encode("utf-8", "surrogatepass")).digest()[:8], "big") % n


def resolve_pool(section: RequestSpec, read: Callable[[str], Secret]) -> ProxyPool | None:
    """The section's pool with each proxy's URL read from its secret; None without ``request.proxies``.

    Raises :class:`SecretUnavailable` naming the secret (never its value) when a URL cannot be read
    or is not a proxy's address."""
    if not section.proxies:
        return None
    proxies = []
    for entry in section.proxies:
        text = read(entry.secret).reveal()
        problem = proxy_problem(text)
        if problem is not None:
            raise SecretUnavailable(entry.secret, f"its value {problem}")
        parts = urlsplit(text)
        address = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], "", "", ""))
        if parts.username is None:
            proxy = Proxy(address)
        else:
            proxy = Proxy(address, unquote(parts.username), Secret(unquote(parts.password or "")))
        proxies.append(PoolProxy(entry.name, entry.tier, proxy))
    return ProxyPool(proxies, section.proxy_rotation)

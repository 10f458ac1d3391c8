"""What a fetcher container keeps between invocations: fetchers, secrets, seed sets and link caches.

Made once per container (the handler's module, the local runner's worker) and passed to every
batch: a warm invocation reuses the connection pools, the robots answers and the secrets a cold
one paid for. Each cache is bounded: a container serves one or two runs at a time.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from sluice.domain.clock import Clock
from sluice.domain.layout import frontier_key
from sluice.domain.secrets import Secret
from sluice.domain.seedset import SeedSet
from sluice.fetch.client import PageFetcher
from sluice.fetch.credentials import RequestCredentials
from sluice.pipeline.credentials import request_credentials
from sluice.pipeline.services import Services
from sluice.pipeline.visit.carried import MapCache
from sluice.pipeline.visit.links import ClaimCache
from sluice.ports import SecretSource
from sluice.spec import CrawlSpec

RUNS_CACHED = 4
"""Runs whose seed set and claim cache a container keeps (it serves one or two at a time)."""


@dataclass
class Container:
    """What outlives an invocation in one container: fetchers (pools, robots caches, the credentials
    their requests carry), the secrets read, seed sets, link caches."""

    allow_loopback: bool
    rng: random.Random = field(default_factory=random.Random)
    fetchers: dict[str, PageFetcher] = field(default_factory=dict)
    seeds: dict[str, SeedSet] = field(default_factory=dict)
    claims: dict[str, ClaimCache] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)
    """Each secret a spec names, read once per container (a new container reads a rotated value)."""
    carried: MapCache = field(default_factory=MapCache)
    """What linking pages carried along their links, as read from their parts (the last few)."""

    async def fetcher(self, spec: CrawlSpec, source: SecretSource | None, clock: Clock) -> PageFetcher:
        """The crawl's fetcher, made on first use with the spec's ``request`` section resolved, on the pipeline's clock.

        Raises :class:`~sluice.domain.secrets.SecretUnavailable` when a secret it names cannot be read:
        nothing is cached then, so the next batch asks the store again."""
        if spec.name not in self.fetchers:
            credentials = await asyncio.to_thread(self._credentials, spec, source) if spec.request.configured else None
            self.fetchers[spec.name] = PageFetcher(
                spec.politeness, allow_loopback=self.allow_loopback, credentials=credentials, clock=clock
            )
        return self.fetchers[spec.name]

    def _credentials(self, spec: CrawlSpec, source: SecretSource | None) -> RequestCredentials:
        return request_credentials(spec, source, self.secrets)

    def seed_set(self, services: Services, crawl: str, run_id: str) -> SeedSet:
        """The run's seed set (what a link is checked against before it is claimed), read once per container."""
        if run_id not in self.seeds:
            data = services.objects.get(frontier_key(crawl, run_id))
            if data is None:
                raise RuntimeError(f"run {run_id} has no seed set at {frontier_key(crawl, run_id)}")
            while len(self.seeds) >= RUNS_CACHED:
                self.seeds.pop(next(iter(self.seeds)))
            self.seeds[run_id] = SeedSet.from_bytes(data)
        return self.seeds[run_id]

    def claim_cache(self, run_id: str) -> ClaimCache:
        """The links of the run this container already saw claimed: not claimed again."""
        if run_id not in self.claims:
            while len(self.claims) >= RUNS_CACHED:
                self.claims.pop(next(iter(self.claims)))
            self.claims[run_id] = ClaimCache()
        return self.claims[run_id]

    async def aclose(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.aclose()
        self.fetchers.clear()

"""The nights `make scale` plays: URLs over hosts, evenly or by Zipf's law, on the stack's own settings."""

from __future__ import annotations

from dataclasses import dataclass

from sluice_tools.scale.inputs import Measured, Site, Stack, default_site
from sluice_tools.scale.model import BatchOrder, FanOut, Finalizer, Night

SIZES = (1_000_000, 10_000_000, 100_000_000)
HOST_COUNTS = (1, 100, 1_000, 10_000)
ZIPF_EXPONENT = 1.0
"""Host sizes of a broad crawl fall off as 1 / rank**s; s = 1 (Zipf's own) puts 13% of 10M URLs over
1,000 hosts on the biggest, about as skewed as crawls of the open web measure."""


def even(urls: int, hosts: int) -> tuple[int, ...]:
    """``urls`` over ``hosts``, as equal as whole numbers allow."""
    share, extra = divmod(urls, hosts)
    return tuple(share + (1 if h < extra else 0) for h in range(hosts))


def zipf(urls: int, hosts: int, exponent: float = ZIPF_EXPONENT) -> tuple[int, ...]:
    """``urls`` over ``hosts`` by Zipf's law, the biggest host first, every host at least one URL.

    Rounded by largest remainder, so the sizes add up to ``urls`` exactly."""
    if urls < hosts:
        raise ValueError(f"{urls} URLs cannot give each of {hosts} hosts one")
    weights = [1.0 / (rank**exponent) for rank in range(1, hosts + 1)]
    total = sum(weights)
    spare = urls - hosts
    raw = [spare * w / total for w in weights]
    sizes = [int(r) for r in raw]
    order = sorted(range(hosts), key=lambda h: raw[h] - sizes[h], reverse=True)
    for h in order[: spare - sum(sizes)]:
        sizes[h] += 1
    return tuple(1 + s for s in sizes)


@dataclass(frozen=True, slots=True)
class Scenario:
    urls: int
    hosts: int
    distribution: str

    def sizes(self) -> tuple[int, ...]:
        return zipf(self.urls, self.hosts) if self.distribution == "zipf" else even(self.urls, self.hosts)

    def night(
        self,
        stack: Stack,
        site: Site,
        *,
        fan_out: FanOut = "round-robin",
        finalizer: Finalizer = "sharded",
        batch_order: BatchOrder = "interleaved",
    ) -> Night:
        """The night on ``stack``; the seed file grouped by host, biggest first (the old fan-out's worst case)."""
        return Night(self.sizes(), site, stack, fan_out=fan_out, finalizer=finalizer, batch_order=batch_order)


def scenarios(sizes: tuple[int, ...] = SIZES, host_counts: tuple[int, ...] = HOST_COUNTS) -> list[Scenario]:
    """Every size over every host count, even and Zipf (one host is both: played once)."""
    out = []
    for urls in sizes:
        for hosts in host_counts:
            for distribution in ("even", "zipf") if hosts > 1 else ("even",):
                out.append(Scenario(urls, hosts, distribution))
    return out


def site_for(measured: Measured) -> Site:
    """The spec's politeness defaults at the site latency `make cost` priced Lambda at."""
    return default_site(measured.site_latency_s)

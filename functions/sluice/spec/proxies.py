"""``request.proxies``: a pool of proxies, each from a secret, in tiers tried in order.

Each proxy names the secret that holds its URL (``http(s)://user:pass@host:port``): a pool's
proxies are credentials, never written in the spec. ``tier`` orders them: a host starts on the lowest tier and moves
to the next when the breaker or a block marker trips on it (as Crawlee's tiered proxies do).
``request.proxy_rotation`` says how a host's requests pick among a tier's healthy proxies:
``sticky`` (the default: one proxy per host for the run, so a site sees one client) or
``round_robin`` (each request the next).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from sluice.domain.secrets import name_problem

MAX_PROXIES = 32
MAX_TIER = 9
ProxyRotation = Literal["sticky", "round_robin"]


class ProxyEntry(BaseModel):
    """One proxy of the pool: its name (in the run's summary), the secret holding its URL, its tier."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")
    """Lower-case letters, digits, ``-`` and ``_``: it names the proxy in summaries and logs, never its URL."""
    secret: str
    """The secret whose value is the proxy's URL, ``http(s)://[user:pass@]host:port`` (a proxy is a
    credential: a pool names its proxies, never writes them)."""
    tier: int = Field(default=0, ge=0, le=MAX_TIER)

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _pool(entries: list[ProxyEntry]) -> list[ProxyEntry]:
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise ValueError(f"proxy {entry.name!r} is named twice: each proxy of the pool has its own name")
        seen.add(entry.name)
    return entries


ProxyPoolSpec = Annotated[list[ProxyEntry], Field(max_length=MAX_PROXIES), AfterValidator(_pool)]
"""The pool, in the order written (a tier's proxies are tried in that order)."""

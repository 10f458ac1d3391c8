"""The spec's ``request`` section resolved for a step that sends requests: a fetcher, or the scheduler reading sitemaps.

Each secret is read from the pipeline's :class:`~sluice.ports.SecretSource` once per ``cache``
(a container keeps its own, so a new container reads a rotated value) and checked before it
goes anywhere; :class:`~sluice.domain.secrets.SecretUnavailable` names the reference, never a value.
"""

from __future__ import annotations

from dataclasses import replace

from sluice.domain.secrets import Secret, SecretUnavailable, checked
from sluice.fetch.credentials import RequestCredentials, resolve_request
from sluice.fetch.proxies import resolve_pool
from sluice.ports import SecretSource
from sluice.spec import CrawlSpec


def request_credentials(
    spec: CrawlSpec, source: SecretSource | None, cache: dict[str, Secret] | None = None
) -> RequestCredentials:
    """What the spec's requests carry, its secrets read through ``source`` (each once per ``cache``)."""
    known = cache if cache is not None else {}

    def read(name: str) -> Secret:
        if name not in known:
            if source is None:
                raise SecretUnavailable(name, "no secret store is wired to this pipeline")
            known[name] = checked(name, source.read(name))
        return known[name]

    resolved = resolve_request(spec.request, spec.credential_origins(), read)
    pool = resolve_pool(spec.request, read)
    return resolved if pool is None else replace(resolved, proxies=pool)

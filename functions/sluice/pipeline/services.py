"""The adapters a pipeline step needs, built once per process from the settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sluice.aws.catalog import Catalog
from sluice.aws.ledger import RunLedger
from sluice.aws.objects import RunObjects
from sluice.aws.queue import FrontierQueue
from sluice.settings import Settings
from sluice.spec import CrawlSpec, SpecError, load_spec

Trigger = Callable[[dict[str, object]], None]


class UnknownCrawl(LookupError):
    """No spec of that name ships with the functions."""


@dataclass(frozen=True)
class Services:
    """Everything a step touches, so that Lambda, the local runner and tests wire it the same way."""

    settings: Settings
    ledger: RunLedger
    catalog: Catalog
    objects: RunObjects
    queue: FrontierQueue
    finalize_later: Trigger
    """Asks for a finalizer run (an async Lambda invoke in AWS, a queue of calls locally)."""
    continue_start: Trigger
    """Asks for the scheduler to continue a large fan-out in a fresh invocation."""

    @classmethod
    def build(cls, settings: Settings, *, finalize_later: Trigger, continue_start: Trigger) -> Services:
        return cls(
            settings=settings,
            ledger=RunLedger(settings.ledger_table, claim_ttl_days=settings.claim_ttl_days),
            catalog=Catalog(settings.catalog_table),
            objects=RunObjects(settings.bucket),
            queue=FrontierQueue(settings.queue_url, urls_per_message=settings.urls_per_message),
            finalize_later=finalize_later,
            continue_start=continue_start,
        )

    def spec(self, crawl: str) -> CrawlSpec:
        return load_crawl(self.settings.specs_dir, crawl)


@lru_cache(maxsize=64)
def load_crawl(specs_dir: Path, crawl: str) -> CrawlSpec:
    """The spec named ``crawl`` from the specs shipped beside the code (cached per container)."""
    for suffix in (".yaml", ".yml", ".json"):
        path = specs_dir / f"{crawl}{suffix}"
        if path.exists():
            spec = load_spec(path)
            if spec.name != crawl:
                raise SpecError(str(path), [f"name: {spec.name!r} does not match the file name {crawl!r}"])
            return spec
    known = sorted(p.stem for p in specs_dir.glob("*.y*ml")) + sorted(p.stem for p in specs_dir.glob("*.json"))
    raise UnknownCrawl(f"no crawl named {crawl!r} in {specs_dir.name}/ (known: {', '.join(known) or 'none'})")

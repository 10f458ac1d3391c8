"""Run a DemoSite in a background thread with its own event loop (for sync tests, benchmarks)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .catalogue import Catalogue
from .config import DemoSiteConfig
from .server import DemoSite
from .stats import DemoStats

_TIMEOUT = 10.0
_CATALOGUE_ARGS = frozenset(inspect.signature(Catalogue).parameters)
_CONFIG_ARGS = frozenset(f.name for f in dataclasses.fields(DemoSiteConfig))


class RunningDemoSite:
    """Thread-safe handle on a site served from a background thread."""

    def __init__(self, site: DemoSite) -> None:
        self.site = site

    @property
    def base_url(self) -> str:
        """e.g. `http://127.0.0.1:8123`."""
        return self.site.base_url

    @property
    def port(self) -> int:
        """The bound port."""
        return self.site.port

    @property
    def stats(self) -> DemoStats:
        """Live statistics (read them with `.snapshot()`, `.count()`, `.records()`)."""
        return self.site.stats

    @property
    def config(self) -> DemoSiteConfig:
        """The config in force."""
        return self.site.config

    @property
    def catalogue(self) -> Catalogue:
        """The content being served."""
        return self.site.catalogue

    def reset(self) -> None:
        """Clear stats, fault attempt counters and test endpoint state."""
        self.site.reset()

    def set_config(self, config: DemoSiteConfig | None = None, **changes: Any) -> DemoSiteConfig:
        """Replace the config (or change some of its fields); returns the new config."""
        new = dataclasses.replace(config or self.site.config, **changes)
        self.site.set_config(new)
        return new

    def set_catalogue(self, catalogue: Catalogue | None = None, **args: Any) -> Catalogue:
        """Replace the content, given a Catalogue or its constructor arguments."""
        new = catalogue if catalogue is not None else Catalogue(**args)
        self.site.set_catalogue(new)
        return new


def _split(
    config: DemoSiteConfig | None, catalogue: Catalogue | None, kw: dict[str, Any]
) -> tuple[DemoSiteConfig, Catalogue]:
    unknown = set(kw) - _CATALOGUE_ARGS - _CONFIG_ARGS
    if unknown:
        raise TypeError(f"unknown demo site arguments: {sorted(unknown)}")
    cat_args = {k: v for k, v in kw.items() if k in _CATALOGUE_ARGS}
    if catalogue is not None and cat_args:
        raise TypeError("pass either a Catalogue or catalogue arguments, not both")
    conf_args = {k: v for k, v in kw.items() if k in _CONFIG_ARGS}
    return (
        dataclasses.replace(config or DemoSiteConfig(), **conf_args),
        catalogue if catalogue is not None else Catalogue(**cat_args),
    )


async def _shutdown(site: DemoSite) -> None:
    await site.stop()
    loop = asyncio.get_running_loop()
    tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), _TIMEOUT)
    await loop.shutdown_asyncgens()


@contextmanager
def running_demo_site(
    config: DemoSiteConfig | None = None,
    catalogue: Catalogue | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    **kw: Any,
) -> Iterator[RunningDemoSite]:
    """Serve a DemoSite in a thread; extra keywords are DemoSiteConfig or Catalogue arguments.

    Example: `with running_demo_site(latency_ms=20, books=100) as site: get(site.base_url)`.
    """
    conf, cat = _split(config, catalogue, kw)
    site = DemoSite(conf, cat)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="demosite", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(site.start(host, port), loop).result(_TIMEOUT)
        yield RunningDemoSite(site)
    finally:
        try:
            asyncio.run_coroutine_threadsafe(_shutdown(site), loop).result(_TIMEOUT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_TIMEOUT)
            if not thread.is_alive():
                loop.close()

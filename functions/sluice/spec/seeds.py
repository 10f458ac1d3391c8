"""Where a run starts: ``seeds`` (URLs, a template over a range, a seed file, sitemaps) and their bounds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, field_validator, model_validator

from sluice.spec.values import HttpUrl, StrictModel, http_url

MAX_SEED_URLS = 10_000_000
MAX_INLINE_SEEDS = 10_000
"""Seed URLs a spec may list itself; longer lists go in a seed file (``seeds.file``), which streams."""
MAX_ROBOTS_SITES = 100
"""Sites whose robots.txt ``seeds.sitemaps.from_robots`` reads at most (the scheduler reads them at the start)."""
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
"""The sitemaps protocol's limit on a sitemap, uncompressed: the default cap, so no conforming sitemap is refused."""


class SeedRange(StrictModel):
    """An inclusive numeric range for a URL template."""

    start: int = Field(ge=0)
    stop: int = Field(ge=0)
    step: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> SeedRange:
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) is before start ({self.start})")
        return self


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


class Sitemaps(StrictModel):
    """Seeds read from sitemaps (sitemaps.org) at the run's start: indexes followed, gzip read, each bounded."""

    urls: list[HttpUrl] = Field(default_factory=list, max_length=1_000)
    """Sitemaps or sitemap indexes, plain or gzipped."""
    from_robots: bool = False
    """Also read the sitemaps that the ``Sitemap:`` lines of the seeds' sites' robots.txt name."""
    max_sitemaps: int = Field(default=100, ge=1, le=10_000)
    """Sitemap documents (indexes and sitemaps) read at most; the rest are refused, each named in the summary."""
    max_bytes: int = Field(default=SITEMAP_MAX_BYTES, ge=1024, le=100 * 1024 * 1024)
    """Bytes of one sitemap, after decompression; a larger one is refused (a gzip bomb stops here)."""
    max_depth: int = Field(default=2, ge=0, le=5)
    """Index hops followed from a listed sitemap: 0 reads the listed ones only, 1 an index's sitemaps too."""
    max_urls: int | None = Field(default=None, ge=1, le=MAX_SEED_URLS)
    """Page URLs taken from sitemaps at most; None: as many as ``follow.max_pages`` leaves room for."""

    @model_validator(mode="after")
    def _some(self) -> Sitemaps:
        if not self.urls and not self.from_robots:
            raise ValueError("give sitemap urls, or from_robots: true to read the seeds' sites' robots.txt")
        return self


def _sitemap_shorthand(value: Any) -> Any:
    """``sitemaps: [URL, ...]`` is ``sitemaps.urls``; ``sitemaps: from_robots`` is ``sitemaps.from_robots: true``."""
    if isinstance(value, list):
        return {"urls": value}
    if isinstance(value, str):
        if value == "from_robots":
            return {"from_robots": True}
        raise ValueError(f"{value!r}: give a list of sitemap URLs, from_robots, or a mapping (urls, from_robots, ...)")
    return value


class Seeds(StrictModel):
    """Where a run starts: explicit URLs, a URL template over a numeric range, a seed file, sitemaps."""

    urls: list[HttpUrl] = Field(default_factory=list)
    template: str | None = None
    range: SeedRange | None = None
    file: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
    """A file of seed URLs, one per line: beside the spec locally, ``seeds/NAME/FILE`` in the bucket when deployed."""
    sitemaps: Annotated[Sitemaps, BeforeValidator(_sitemap_shorthand)] | None = None
    """Sitemaps whose pages are seeds too (shorthands: a list of URLs, or ``from_robots``)."""

    @field_validator("urls")
    @classmethod
    def _not_too_many(cls, urls: list[str]) -> list[str]:
        if len(urls) > MAX_INLINE_SEEDS:
            raise ValueError(
                f"{len(urls)} URLs is more than the {MAX_INLINE_SEEDS} a spec may list: put them in a seed file, "
                "one per line, and name it in seeds.file"
            )
        return urls

    @field_validator("template")
    @classmethod
    def _template(cls, template: str | None) -> str | None:
        if template is None:
            return None
        if "{n}" not in template:
            raise ValueError("a template needs the placeholder {n}")
        http_url(template.replace("{n}", "1"))
        return template

    @model_validator(mode="after")
    def _some(self) -> Seeds:
        if (self.template is None) != (self.range is None):
            raise ValueError("template and range go together")
        if not self.urls and self.template is None and self.file is None and self.sitemaps is None:
            raise ValueError("give seed urls, a template with a range, a seed file, or sitemaps")
        if self.sitemaps is not None and self.sitemaps.from_robots:
            sites = len(self.robots_sites())
            if sites == 0:
                raise ValueError(
                    "sitemaps.from_robots reads the robots.txt of the seeds' sites: give a seed URL "
                    "(seeds.urls, seeds.template) or a sitemap URL on the site"
                )
            if sites > MAX_ROBOTS_SITES:
                raise ValueError(
                    f"sitemaps.from_robots reads the robots.txt of each seed's site, at most {MAX_ROBOTS_SITES}; "
                    f"the seeds name {sites}: list their sitemaps in sitemaps.urls instead"
                )
        if self.count() > MAX_SEED_URLS:
            raise ValueError(f"{self.count()} seeds is more than the {MAX_SEED_URLS} a run takes")
        if self.template is not None and self.range is not None:
            http_url(self.template.replace("{n}", str(self.range.stop)))  # the longest URL it makes
        return self

    def count(self) -> int:
        """How many URLs :meth:`iter_urls` yields, without expanding them (a seed file's are not counted)."""
        ranged = len(range(self.range.start, self.range.stop + 1, self.range.step)) if self.range else 0
        return len(self.urls) + ranged

    def robots_sites(self) -> list[str]:
        """The origins (``scheme://host:port``) whose robots.txt ``sitemaps.from_robots`` reads, in spec order."""
        urls = [*self.urls, *(self.sitemaps.urls if self.sitemaps is not None else [])]
        if self.template is not None:
            urls.insert(len(self.urls), self.template.replace("{n}", "1"))
        return list(dict.fromkeys(_origin(u) for u in urls))

    def iter_urls(self) -> Iterator[str]:
        """Yield every seed URL lazily: a million-URL range never becomes a list."""
        yield from self.urls
        if self.template is not None and self.range is not None:
            for n in range(self.range.start, self.range.stop + 1, self.range.step):
                yield self.template.replace("{n}", str(n))

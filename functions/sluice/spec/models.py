"""The crawl spec: one YAML or JSON file that says what to crawl, what to extract and how politely.

Every model forbids unknown keys, so a typo is an error that names the key, never a
silently ignored setting. :func:`load_spec` turns any problem into a :class:`SpecError`
listing every error with its dotted path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_serializer,
    model_validator,
)

from sluice.domain.pages import MAX_URL
from sluice.domain.recrawl import DAY_S, Schedule
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.structured import StructuredPath
from sluice.extraction.urls import Scope, inspect_url
from sluice.spec.request import Origin, RequestSpec, origin_of, show_origin
from sluice.spec.selectors import FieldSelector, check_css, parse_field_selector

_WHITESPACE = re.compile(r"\s")
DEFAULT_USER_AGENT = "Sluice/0.1 (a polite scheduled crawler)"
DEFAULT_RETRY_STATUSES = (408, 429, 500, 502, 503, 504)
MAX_SEED_URLS = 10_000_000
MAX_INLINE_SEEDS = 10_000
"""Seed URLs a spec may list itself; longer lists go in a seed file (``seeds.file``), which streams."""
MAX_ROBOTS_SITES = 100
"""Sites whose robots.txt ``seeds.sitemaps.from_robots`` reads at most (the scheduler reads them at the start)."""
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
"""The sitemaps protocol's limit on a sitemap, uncompressed: the default cap, so no conforming sitemap is refused."""


class SpecError(Exception):
    """A spec that cannot be used; ``errors`` holds one ``'path: what is wrong'`` line per problem."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: {len(errors)} error(s)\n" + "\n".join(f"  {e}" for e in errors))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_seed_url(value: str) -> str:
    """``value`` if a run can carry it as a seed, else ValueError saying why (the rules of ``seeds.urls``)."""
    return _http_url(value)


def _http_url(value: str) -> str:
    """An absolute http(s) URL as the WHATWG URL Standard parses it, without credentials, that a run can carry."""
    shown = repr(value) if len(value) <= 120 else f"{value[:100]!r}... ({len(value)} characters)"
    if len(value) > MAX_URL:
        raise ValueError(f"{shown} is longer than the {MAX_URL} characters a URL may have")
    if _WHITESPACE.search(value):
        raise ValueError(f"{shown} contains whitespace")
    if not value[:8].lower().startswith(("http://", "https://")):
        raise ValueError(f"{shown} is not an http(s) URL")
    try:
        canonical, credentials = inspect_url(value)
    except ValueError:
        raise ValueError(f"{shown} is not a valid URL (its host or port cannot be parsed)") from None
    if credentials:
        raise ValueError(
            f"{shown} carries a user name or password: credentials never go in a URL (they would be sent to the site)"
        )
    if len(canonical) > MAX_URL:
        raise ValueError(f"{shown} is longer than the {MAX_URL} characters a URL may have, once encoded")
    return value


def _regex(value: str) -> str:
    compile_pattern(value)  # PatternError (a ValueError) says what is wrong with it
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
CssSelector = Annotated[str, BeforeValidator(lambda v: check_css(v) if isinstance(v, str) else v)]
Regex = Annotated[str, BeforeValidator(lambda v: _regex(v) if isinstance(v, str) else v)]


def _field_name(value: str) -> str:
    if value.startswith("_"):
        raise ValueError(f"{value!r}: field names starting with '_' are reserved (every record carries _key and _page)")
    return value


FieldName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"), AfterValidator(_field_name)]


class SeedRange(_Strict):
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


class Sitemaps(_Strict):
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


class Seeds(_Strict):
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
        _http_url(template.replace("{n}", "1"))
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
            _http_url(self.template.replace("{n}", str(self.range.stop)))  # the longest URL it makes
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


class Follow(_Strict):
    """Which links a run follows, and how far."""

    selectors: list[CssSelector] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)
    allow: list[Regex] = Field(default_factory=list)
    deny: list[Regex] = Field(default_factory=list)
    max_depth: int | None = Field(default=None, ge=0, le=MAX_SEED_URLS)
    """Link hops from a seed; None (the default): as deep as links lead, within ``max_pages``."""
    max_pages: int = Field(default=10_000, ge=1, le=MAX_SEED_URLS)

    @property
    def depth_limit(self) -> int:
        """The deepest hop a run follows: ``max_depth``, or ``max_pages`` (no chain of new pages is longer)."""
        return self.max_depth if self.max_depth is not None else self.max_pages

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, domains: list[str]) -> list[str]:
        for domain in domains:
            if not re.fullmatch(r"[A-Za-z0-9.-]{1,253}(:\d{1,5})?", domain):
                raise ValueError(f"{domain!r} is not a domain name (no scheme, no path)")
        return [d.lower() for d in domains]


Step = Literal["strip", "lower", "number", "int", "price", "absolute_url", "collapse_whitespace"]


class RegexStep(_Strict):
    """Keep the first match of ``regex`` (its first group if it has one), else the field is missing."""

    regex: Regex


class ReplaceStep(_Strict):
    """Replace every occurrence of ``replace[0]`` by ``replace[1]``."""

    replace: tuple[str, str]


def _step_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value)) if next(iter(value)) in ("regex", "replace") else None
    if isinstance(value, RegexStep | ReplaceStep):
        return "regex" if isinstance(value, RegexStep) else "replace"
    return None


ProcessStep = Annotated[
    Annotated[Step, Tag("name")] | Annotated[RegexStep, Tag("regex")] | Annotated[ReplaceStep, Tag("replace")],
    Discriminator(
        _step_kind,
        custom_error_type="invalid_step",
        custom_error_message="a step is a name (strip, lower, number, int, price, absolute_url, "
        "collapse_whitespace) or a mapping {regex: PATTERN} or {replace: [OLD, NEW]}",
    ),
]


StructuredPathText = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^.\s]+(\.[^.\s]+)*$")]
_STRUCTURED_KEYS = ("structured", "path", "type")


class ExtractField(_Strict):
    """One named field: a selector (or a structured-data path), its post-processing steps, and whether a record
    needs it."""

    selector: FieldSelector | None = None
    structured: Literal["jsonld", "microdata", "opengraph"] | None = None
    """Read the page's structured data instead of a selector (:mod:`sluice.extraction.structured`)."""
    path: StructuredPathText | None = None
    """Dotted keys into the structured data (``offers.price``; a number indexes an array), or an OpenGraph property."""
    type: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Only JSON-LD nodes or microdata items of this ``@type`` (``Product``, or its IRI)."""
    process: list[ProcessStep] = Field(default_factory=lambda: ["strip"])  # type: ignore[arg-type]
    required: bool = False
    many: bool = False

    @field_validator("selector", mode="before")
    @classmethod
    def _selector(cls, value: Any) -> Any:
        if value is None or isinstance(value, FieldSelector):
            return value
        if isinstance(value, str):
            return parse_field_selector(value)
        raise ValueError("a selector is a string, like 'h1::text' or 'a::attr(href)'")

    @model_validator(mode="after")
    def _one_source(self) -> ExtractField:
        if (self.selector is None) == (self.structured is None):
            raise ValueError("give a selector, or structured (jsonld, microdata, opengraph) with a path: one of them")
        if self.structured is None and (self.path is not None or self.type is not None):
            raise ValueError("path and type go with structured (jsonld, microdata or opengraph)")
        if self.structured is not None and self.path is None:
            raise ValueError(f"structured: {self.structured} needs a path, like 'offers.price' or 'og:title'")
        if self.structured == "opengraph" and self.type is not None:
            raise ValueError("type picks JSON-LD nodes or microdata items: OpenGraph properties have none")
        return self

    def structured_path(self) -> StructuredPath | None:
        """The field's structured source, path and type, ready to read (None for a selector field)."""
        if self.structured is None or self.path is None:
            return None
        return StructuredPath(self.structured, self.path, self.type)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        # A selector field dumps as it did before structured fields existed: spec digests stay as they were.
        dumped = handler(self)
        if isinstance(dumped, dict) and self.structured is None:
            for key in _STRUCTURED_KEYS:
                dumped.pop(key, None)
        return dumped


def _field_shorthand(value: Any) -> Any:
    return {"selector": value} if isinstance(value, str) else value


class Extract(_Strict):
    """Records: an item selector (None: the page is one item), named fields, and the record key."""

    item: CssSelector | None = None
    pages: Regex | None = None
    fields: dict[FieldName, Annotated[ExtractField, BeforeValidator(_field_shorthand)]] = Field(min_length=1)
    key: list[str] | None = None

    @model_validator(mode="after")
    def _key_fields(self) -> Extract:
        for name in self.key or []:
            if name not in self.fields:
                raise ValueError(f"key names {name!r}, which is not a field (fields: {', '.join(self.fields)})")
        return self


TypeName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
"""A page type's name: it names the type's output folder (``type=NAME/``) and its records' ``_type``."""
RuleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
MAX_CARRY_BYTES = 2048
"""Carried data a task holds at most, as compact JSON: it travels in every queue message of the link."""


class LinkRule(_Strict):
    """A page type's named follow rule: the links its selectors find, and the fields carried along them."""

    selectors: list[CssSelector] = Field(min_length=1)
    carry: list[FieldName] = Field(default_factory=list, max_length=32)
    """Fields of the page's first record merged into the records of the pages these links lead to."""


class PageType(_Strict):
    """One kind of page: which pages it is (URL pattern and/or the rules whose links lead there), what they hold."""

    pages: Regex | None = None
    """A URL pattern (searched, RE2) a page of this type matches."""
    via: list[RuleName] = Field(default_factory=list)
    """Follow rules (of any type) whose links lead to pages of this type; empty: any way, seeds included."""
    extract: Extract
    follow: dict[RuleName, LinkRule] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _matched(self) -> PageType:
        if self.pages is None and not self.via:
            raise ValueError("a page type needs pages (a URL pattern), via (follow rules leading to it), or both")
        if self.extract.pages is not None:
            raise ValueError("a page type's extract takes no pages pattern: give the type's pages instead")
        for name, rule in self.follow.items():
            for carried in rule.carry:
                if carried not in self.extract.fields:
                    raise ValueError(f"follow.{name}.carry names {carried!r}, which is not a field of this type")
        return self


class RetryPolicy(_Strict):
    """How often and how patiently a page is retried."""

    times: int = Field(default=3, ge=0, le=10)
    status_codes: list[int] = Field(default_factory=lambda: list(DEFAULT_RETRY_STATUSES))
    backoff_base_seconds: float = Field(default=0.5, gt=0, le=60)
    backoff_max_seconds: float = Field(default=30.0, gt=0, le=900)
    retry_after_max_seconds: float = Field(default=120.0, ge=0, le=900)

    @field_validator("status_codes")
    @classmethod
    def _statuses(cls, codes: list[int]) -> list[int]:
        for code in codes:
            if not 400 <= code <= 599:
                raise ValueError(f"{code} is not an HTTP error status (400-599)")
        return codes


class Breaker(_Strict):
    """When a host is taken to refuse the crawler: it is paused for the run, its URLs skipped with the reason."""

    enabled: bool = True
    min_answers: int = Field(default=20, ge=1, le=100_000)
    """Answers counted since the host's first refusal in the run before the share is judged."""
    max_blocked_share: float = Field(default=0.5, gt=0, le=1)
    """The breaker trips when more of those answers than this are refusals."""
    statuses: list[int] = Field(default_factory=lambda: [403, 429], max_length=20)
    """Statuses that count as a refusal (a 429 that sends Retry-After is throttling, obeyed, not counted)."""
    markers: list[Annotated[str, Field(min_length=3, max_length=200)]] = Field(default_factory=list, max_length=20)
    """Texts whose presence in a page makes it a refusal (a captcha or block page served with 200)."""

    @field_validator("statuses")
    @classmethod
    def _http_statuses(cls, value: list[int]) -> list[int]:
        bad = [s for s in value if not 400 <= s <= 599]
        if bad:
            raise ValueError(f"refusal statuses are 4xx or 5xx, not {bad}")
        return value


class Politeness(_Strict):
    """What the crawl promises the sites it visits: every per-host limit holds for the whole fleet."""

    concurrency: int = Field(default=32, ge=1, le=512)
    concurrency_per_domain: int = Field(default=8, ge=1, le=128)
    min_delay_seconds: float = Field(default=0.0, ge=0, le=300)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1, max_length=512)
    obey_robots: bool = True
    timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    max_body_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    max_redirects: int = Field(default=5, ge=0, le=20)
    content_types: list[str] = Field(default_factory=lambda: ["text/html", "application/xhtml+xml"])
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    adaptive: bool = True
    """Lower a host's concurrency below ``concurrency_per_domain`` when it slows down or answers 429/503,
    and raise it back while its latency stays flat (never above the cap)."""
    breaker: Breaker = Field(default_factory=Breaker)

    @field_validator("user_agent")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if any(c in value for c in "\r\n"):
            raise ValueError("a user agent is one line")
        return value


class Alerts(_Strict):
    """When a finished run is unhealthy."""

    record_count_floor: float = Field(default=0.5, ge=0, le=1)
    max_error_rate: float = Field(default=0.1, ge=0, le=1)
    max_null_rate: float | None = Field(default=None, ge=0, le=1)
    max_gone_rate: float | None = Field(default=None, ge=0, le=1)
    """If set, unhealthy when more of the last run's records are gone (absent from this run) than this share."""
    fail_when_truncated: bool = False
    """A run that ``follow.max_pages`` or ``follow.max_depth`` cut short is unhealthy (else it only says so)."""
    fail_when_carry_lost: bool = False
    """A run with pages that kept stale carried data, or carried fields left out of a link's data, is unhealthy
    (else its ``carry_stale`` and ``carry_dropped`` checks only say so)."""


class Output(_Strict):
    """Where a run's records go besides its JSON Lines output in S3 (or the local state folder)."""

    records_table: bool = False
    """Also keep each record key's current record in the records table (one write per new or changed record)."""
    archive: bool = False
    """Also keep every fetched response as WARC (one gzipped file per batch), so ``sluice reextract`` can rebuild
    a run's records with a changed spec without asking the site again."""


class Recrawl(_Strict):
    """Adaptive recrawl: a page known from earlier runs is asked again once its interval has run out, an interval
    that grows while the page does not change and shrinks when it does (:mod:`sluice.domain.recrawl`)."""

    adaptive: bool = True
    """False: every page is asked every run, as without the section (the settings stay for when it is turned on)."""
    min_interval_days: float = Field(default=1.0, ge=1 / 24, le=365)
    """A page's shortest interval, and a new page's first: the crawl's schedule, for a nightly crawl 1."""
    max_age_days: float = Field(default=7.0, ge=1 / 24, le=365)
    """The longest a page goes unasked: a change is collected at most this long after it was made."""
    grow: float = Field(default=0.4, gt=0, le=4)
    """A fetch that finds the page unchanged multiplies its interval by 1 + grow (Nutch's INC_RATE)."""
    shrink: float = Field(default=0.2, gt=0, lt=1)
    """A fetch that finds it changed multiplies its interval by 1 - shrink (Nutch's DEC_RATE)."""
    seeds: Literal["scheduled", "always"] = "scheduled"
    """``always``: the spec's seeds are asked every run (listing pages where new links appear first)."""

    @model_validator(mode="after")
    def _bounded(self) -> Recrawl:
        if self.max_age_days < self.min_interval_days:
            raise ValueError(
                f"max_age_days ({self.max_age_days:g}) is shorter than min_interval_days ({self.min_interval_days:g})"
            )
        return self

    def schedule(self) -> Schedule | None:
        """The schedule the pipeline runs by; None when ``adaptive`` is off."""
        if not self.adaptive:
            return None
        return Schedule(
            min_interval=round(self.min_interval_days * DAY_S),
            max_age=round(self.max_age_days * DAY_S),
            grow=self.grow,
            shrink=self.shrink,
            seeds_always=self.seeds == "always",
        )


_SCHEDULE = re.compile(r"rate\(\s*\d+\s+(minute|minutes|hour|hours|day|days)\s*\)|cron\((\S+\s+){5}\S+\)")


_CRON_RANGES = (("minutes", 0, 59), ("hours", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12))


def _schedule_problem(expression: str) -> str | None:
    """What EventBridge would refuse in an expression that has the right shape."""
    if expression.startswith("rate("):
        amount = int(expression[5:].split()[0])
        return "a rate needs a positive amount" if amount < 1 else None
    fields = expression[5:-1].split()
    for (name, low, high), field_value in zip(_CRON_RANGES, fields, strict=False):
        for number in re.findall(r"\d+", field_value.split("/")[0]):
            if not low <= int(number) <= high:
                return f"{name} {number} is outside {low}-{high}"
    if fields[2] != "?" and fields[4] != "?":
        return "one of day-of-month and day-of-week must be '?'"
    return None


class CrawlSpec(_Strict):
    """A whole crawl."""

    name: str
    seeds: Seeds
    follow: Follow = Field(default_factory=Follow)
    extract: Extract | None = None
    """What records to take from each page: the one page type (or give ``types``)."""
    types: dict[TypeName, PageType] | None = Field(default=None, min_length=2, max_length=20)
    """Several page types, each with its own extract and follow rules (instead of ``extract``)."""
    politeness: Politeness = Field(default_factory=Politeness)
    request: RequestSpec = Field(default_factory=RequestSpec)
    """Headers, cookies, basic auth and a proxy for every request; secrets by reference only."""
    alerts: Alerts = Field(default_factory=Alerts)
    output: Output = Field(default_factory=Output)
    schedule: str | None = None
    recrawl: Recrawl | None = None
    """Adaptive recrawl (None: every known page is asked every run)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", value):
            raise ValueError(
                f"{value!r} is not a crawl name: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
            )
        return value

    @model_validator(mode="after")
    def _one_or_types(self) -> CrawlSpec:
        if (self.extract is None) == (self.types is None):
            raise ValueError("give extract (one page type) or types (several), not both and not neither")
        if self.types is not None:
            rules = {rule for kind in self.types.values() for rule in kind.follow}
            for name, kind in self.types.items():
                for rule in kind.via:
                    if rule not in rules:
                        raise ValueError(f"types.{name}.via names {rule!r}, which no type's follow rules name")
        return self

    @model_validator(mode="after")
    def _fields_fit_the_tables(self) -> CrawlSpec:
        """Field names the crawl's tables can hold as columns: no partition's name (its value would replace the
        record's), and no two that are one name when case is ignored (the tables and Athena's JSON reader take
        names without case: a query would fail on every table)."""
        partitions = ["crawl", "run", *(["type"] if self.types is not None else [])]
        seen: dict[str, tuple[str, str]] = {}
        for kind, extract in self.extracts().items():
            where = "extract.fields" if kind is None else f"types.{kind}.extract.fields"
            for name in extract.fields:
                folded = name.lower()
                if folded in partitions:
                    raise ValueError(
                        f"{where}.{name}: {name!r} is a partition column of the crawl's tables "
                        f"({', '.join(partitions)}): the output path's value would stand for the record's; "
                        "rename the field"
                    )
                other = seen.setdefault(folded, (name, where))
                if other[0] != name:
                    raise ValueError(
                        f"{where}.{name}: the same column as {other[1]}.{other[0]} when case is ignored (the tables "
                        "and Athena's JSON reader take names without case): give both one spelling, or rename one"
                    )
        return self

    def page_type(self, url: str, via: str | None) -> str | None:
        """The first type (in spec order) a page is: its URL matches ``pages`` and ``via`` has the rule that led
        there (each where given); None for a one-type spec, or a page no type takes."""
        for name, kind in (self.types or {}).items():
            if kind.pages is not None and compile_pattern(kind.pages).search(url) is None:
                continue
            if kind.via and via not in kind.via:
                continue
            return name
        return None

    def shadowed_types(self) -> list[str]:
        """A warning per type that can never be a page's type: an earlier type takes every page it could (its
        ``pages`` pattern is none or the same, its ``via`` none or holding all the later type's). Types are tried
        in spec order (:meth:`page_type`), so the later one's extract would never run."""
        warnings = []
        kinds = list((self.types or {}).items())
        for i, (name, kind) in enumerate(kinds):
            for earlier_name, earlier in kinds[:i]:
                pages = earlier.pages is None or earlier.pages == kind.pages
                via = not earlier.via or (bool(kind.via) and set(kind.via) <= set(earlier.via))
                if pages and via:
                    warnings.append(
                        f"types.{name} can never match: types.{earlier_name}, earlier in the spec, takes every page "
                        "it could (types are tried in order; put the narrower type first)"
                    )
                    break
        return warnings

    def extracts(self) -> dict[str | None, Extract]:
        """Each page type's extract, by type name; a one-type spec's is under None."""
        if self.types is None:
            assert self.extract is not None  # noqa: S101 - the validator requires one of them
            return {None: self.extract}
        return {name: kind.extract for name, kind in self.types.items()}

    @model_validator(mode="after")
    def _seed_file_scope(self) -> CrawlSpec:
        if self.seeds.file is not None and not self.follow.allowed_domains:
            raise ValueError(
                "seeds.file needs follow.allowed_domains: the crawl's scope is not read from a file of a million lines"
            )
        return self

    @model_validator(mode="after")
    def _seeds_fit(self) -> CrawlSpec:
        if self.seeds.count() > self.follow.max_pages:
            raise ValueError(
                f"seeds: {self.seeds.count()} seed URLs is more than follow.max_pages ({self.follow.max_pages}); "
                "raise max_pages or seed fewer pages"
            )
        return self

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_list(cls, value: Any) -> Any:
        return {"urls": value} if isinstance(value, list) else value

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _SCHEDULE.fullmatch(value.strip()):
            raise ValueError(f"{value!r} is not an EventBridge expression like 'rate(1 day)' or 'cron(17 3 * * ? *)'")
        problem = _schedule_problem(value.strip())
        if problem:
            raise ValueError(f"{value!r}: {problem}")
        return value

    def domains(self) -> frozenset[str]:
        """The hosts a run may visit: ``follow.allowed_domains``, else the seeds' and the listed sitemaps' hosts."""
        if self.follow.allowed_domains:
            return frozenset(self.follow.allowed_domains)
        sitemaps = self.seeds.sitemaps.urls if self.seeds.sitemaps is not None else []
        hosts = {urlsplit(u).hostname or "" for u in [*self.seeds.urls, *sitemaps]}
        if self.seeds.template:
            hosts.add(urlsplit(self.seeds.template.replace("{n}", "1")).hostname or "")
        return frozenset(h.lower() for h in hosts if h)

    def credential_origins(self) -> frozenset[Origin]:
        """The origins the ``request`` section's credentials go to: the seed URLs', the template's, the listed
        sitemaps' and ``request.origins``. Another port, plain http beside https, a subdomain: each is named or
        gets none (a seed file names no origin: its crawl lists them in ``request.origins``)."""
        sitemaps = self.seeds.sitemaps.urls if self.seeds.sitemaps is not None else []
        urls = [*self.seeds.urls, *sitemaps, *self.request.origins]
        if self.seeds.template:
            urls.append(self.seeds.template.replace("{n}", "1"))
        return frozenset(o for o in map(origin_of, urls) if o is not None)

    @model_validator(mode="after")
    def _credential_origins(self) -> CrawlSpec:
        if not self.request.has_credentials:
            return self
        if not self.credential_origins():
            raise ValueError(
                "request.origins: the seeds name no origin for the credentials to go to (a seed file's are not read "
                "when the spec is checked): list them, e.g. origins: [https://shop.example]"
            )
        hosts = replace(Scope.from_spec(self), allow=(), deny=())
        for i, text in enumerate(self.request.origins):
            origin = origin_of(text)
            if origin is not None and not hosts.allows(f"{show_origin(origin)}/"):
                raise ValueError(
                    f"request.origins: entry {i + 1}: {text!r} is not on the crawl's hosts "
                    "(follow.allowed_domains, else the seeds' hosts): no page there is crawled"
                )
        return self

    def digest(self) -> str:
        """A stable hash of the spec's content, recorded with each run.

        An empty ``request`` section is left out, so specs written before it existed keep their digest
        (a changed digest makes the next run fetch every page whole). Secrets are in it by name only."""
        # So is an absent ``types`` (one-type specs keep their digest) and the absent extract of a typed spec.
        # ``recrawl`` never is: it says when pages are asked, not what their records are, so turning it on or
        # changing its numbers keeps the catalog's records reused and its pages' intervals.
        left_out: dict[str, Any] = {"request": True} if not self.request.configured else {}
        # Keys added later are left out at their defaults, so the specs written before them keep their digest.
        if self.request.configured and not self.request.origins:
            left_out["request"] = {"origins": True}
        if not self.alerts.fail_when_carry_lost:
            left_out["alerts"] = {"fail_when_carry_lost": True}
        left_out["recrawl"] = True
        left_out |= {"types": True} if self.types is None else {"extract": True}
        # So is output.archive: keeping the responses changes no record, so switching it on fetches nothing anew.
        left_out["output"] = {"archive": True}
        content = self.model_dump(mode="json", exclude=left_out)
        canonical = json.dumps(content, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

"""The whole crawl: :class:`CrawlSpec`, the sections no other module holds (alerts, output, recrawl, schedule),
the rules that join the sections, and the digest recorded with each run.

Every model forbids unknown keys, so a typo is an error that names the key, never a
silently ignored setting. :func:`~sluice.spec.load.load_spec` turns any problem into a
:class:`~sluice.spec.values.SpecError` listing every error with its dotted path.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sluice.domain.recrawl import DAY_S, Schedule
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.urls import Scope
from sluice.spec.extraction import Extract
from sluice.spec.follow import Follow, PageType, TypeName
from sluice.spec.politeness import Politeness
from sluice.spec.request import Origin, RequestSpec, origin_of, show_origin
from sluice.spec.seeds import Seeds
from sluice.spec.values import StrictModel


class Alerts(StrictModel):
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


class Output(StrictModel):
    """Where a run's records go besides its JSON Lines output in S3 (or the local state folder)."""

    records_table: bool = False
    """Also keep each record key's current record in the records table (one write per new or changed record)."""
    archive: bool = False
    """Also keep every fetched response as WARC (one gzipped file per batch), so ``sluice reextract`` can rebuild
    a run's records with a changed spec without asking the site again."""


class Recrawl(StrictModel):
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


class CrawlSpec(StrictModel):
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

    @model_validator(mode="after")
    def _seeds_in_scope(self) -> CrawlSpec:
        # A seed is visited only if the crawl's scope allows it (hosts, then follow.deny and follow.allow, as a
        # link): one that cannot be would be skipped at every run, its pages never crawled, and said nowhere else.
        scope = Scope.from_spec(self)
        seeds = [(f"seeds.urls: entry {i + 1}", url) for i, url in enumerate(self.seeds.urls)]
        if self.seeds.template is not None and self.seeds.range is not None:
            seeds.append(("seeds.template", self.seeds.template.replace("{n}", str(self.seeds.range.start))))
        for where, url in seeds:
            why = scope.reason(url)
            if why is not None:
                raise ValueError(
                    f"{where}: {url!r} is out of the crawl's scope ({why}): no run would fetch it; "
                    "change the seed or the follow rules"
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
        return _url_hosts((*self.seeds.urls, *sitemaps), self.seeds.template)

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


@lru_cache(maxsize=16)
def _url_hosts(urls: tuple[str, ...], template: str | None) -> frozenset[str]:
    """The hosts of ``urls`` and of ``template``'s URLs, lower case. Cached: a run asks once per batch (its
    scope) and once at its start, and a spec may list a thousand seed URLs (1,200 of them cost 3 ms a time)."""
    hosts = {urlsplit(u).hostname or "" for u in urls}
    if template:
        hosts.add(urlsplit(template.replace("{n}", "1")).hostname or "")
    return frozenset(h.lower() for h in hosts if h)

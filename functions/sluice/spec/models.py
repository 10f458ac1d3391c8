"""Every model of the crawl spec, one import away (``from sluice.spec.models import Politeness``).

The models live in modules named for what they hold: :mod:`~sluice.spec.values` (the error, the strict
base and the checked strings), :mod:`~sluice.spec.seeds`, :mod:`~sluice.spec.follow` (links and page types),
:mod:`~sluice.spec.extraction` (fields and their steps), :mod:`~sluice.spec.politeness` (and retries, the
breaker), :mod:`~sluice.spec.request` (headers, credentials, proxies) and :mod:`~sluice.spec.crawl` (the
whole crawl: alerts, output, recrawl, schedule, and the rules that join the sections).
"""

from sluice.spec.crawl import Alerts, CrawlSpec, Output, Recrawl
from sluice.spec.extraction import Extract, ExtractField, ProcessStep, RegexStep, ReplaceStep, Step, StructuredPathText
from sluice.spec.follow import MAX_CARRY_BYTES, Follow, LinkRule, PageType, RuleName, TypeName
from sluice.spec.politeness import DEFAULT_RETRY_STATUSES, DEFAULT_USER_AGENT, Breaker, Politeness, RetryPolicy
from sluice.spec.seeds import (
    MAX_INLINE_SEEDS,
    MAX_ROBOTS_SITES,
    MAX_SEED_URLS,
    SITEMAP_MAX_BYTES,
    SeedRange,
    Seeds,
    Sitemaps,
)
from sluice.spec.values import CssSelector, FieldName, HttpUrl, Regex, SpecError, check_seed_url

__all__ = [
    "DEFAULT_RETRY_STATUSES",
    "DEFAULT_USER_AGENT",
    "MAX_CARRY_BYTES",
    "MAX_INLINE_SEEDS",
    "MAX_ROBOTS_SITES",
    "MAX_SEED_URLS",
    "SITEMAP_MAX_BYTES",
    "Alerts",
    "Breaker",
    "CrawlSpec",
    "CssSelector",
    "Extract",
    "ExtractField",
    "FieldName",
    "Follow",
    "HttpUrl",
    "LinkRule",
    "Output",
    "PageType",
    "Politeness",
    "ProcessStep",
    "Recrawl",
    "Regex",
    "RegexStep",
    "ReplaceStep",
    "RetryPolicy",
    "RuleName",
    "SeedRange",
    "Seeds",
    "Sitemaps",
    "SpecError",
    "Step",
    "StructuredPathText",
    "TypeName",
    "check_seed_url",
]

"""The crawl spec: one YAML or JSON file that says what to crawl, what to extract and how politely."""

from sluice.spec.crawl import Alerts, CrawlSpec, Output
from sluice.spec.extraction import Extract, ExtractField, ProcessStep, RegexStep, ReplaceStep, Step
from sluice.spec.follow import Follow, LinkRule, PageType
from sluice.spec.load import SPEC_SUFFIXES, find_spec, load_spec, parse_spec, spec_files
from sluice.spec.politeness import DEFAULT_RETRY_STATUSES, DEFAULT_USER_AGENT, Politeness, RetryPolicy
from sluice.spec.request import BasicAuth, RequestSpec, SecretRef
from sluice.spec.seeds import MAX_INLINE_SEEDS, MAX_SEED_URLS, SeedRange, Seeds, Sitemaps
from sluice.spec.values import SpecError, check_seed_url

__all__ = [
    "DEFAULT_RETRY_STATUSES",
    "DEFAULT_USER_AGENT",
    "MAX_INLINE_SEEDS",
    "MAX_SEED_URLS",
    "SPEC_SUFFIXES",
    "Alerts",
    "BasicAuth",
    "CrawlSpec",
    "Extract",
    "ExtractField",
    "Follow",
    "LinkRule",
    "Output",
    "PageType",
    "Politeness",
    "ProcessStep",
    "RegexStep",
    "ReplaceStep",
    "RequestSpec",
    "RetryPolicy",
    "SecretRef",
    "SeedRange",
    "Seeds",
    "Sitemaps",
    "SpecError",
    "Step",
    "check_seed_url",
    "find_spec",
    "load_spec",
    "parse_spec",
    "spec_files",
]

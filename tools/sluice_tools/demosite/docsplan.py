"""The documentation site's shape: sections, page titles and slugs, related pages and versions.

Everything is a pure function of (pages, seed, version, changed_fraction); only `changed_in`
depends on the version, so the link graph (and a crawl's page count) never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from .books import rng, slugify

PAGES_PER_SECTION = 100
"""Sections hold about this many pages: ceil(pages / 100) sections, sizes differing by at most one."""
RELATED_LINKS = 100
"""In-text links per page to pages of other sections (more when the sidebar is short, see `related`)."""
MIN_LINKS = 200
"""Distinct in-scope pages (self excluded) every article links to, when the site has that many."""

# fmt: off
_SECTIONS = (
    "Getting Started", "Installation", "Crawl Specs", "Selectors", "Link Following", "Politeness",
    "Robots", "Retries", "Fetching", "Extraction", "Records", "Storage", "Scheduling", "Runs",
    "Monitoring", "Alerts", "Deployment", "Security", "Testing", "Benchmarks", "Internals",
    "API Reference", "Tutorials", "FAQ",
)
_VERBS = (
    "Configuring", "Understanding", "Tuning", "Debugging", "Deploying", "Testing", "Monitoring",
    "Extending", "Migrating", "Securing", "Scaling", "Writing", "Choosing", "Measuring",
)
_SUBJECTS = (
    "the Frontier", "Retry Policies", "Robots Rules", "Crawl Delays", "Link Extraction", "Record Keys",
    "Field Selectors", "the Run Ledger", "Seed Templates", "Politeness Limits", "Body Size Caps",
    "Redirect Guards", "Canonical URLs", "Schedules", "Alerts", "Batch Sizes", "Sitemaps",
    "Content Types", "User Agents", "Conditional Requests", "Compression", "Timeouts", "Backoff",
    "Sinks", "Queues", "Workers", "Metrics", "Traces", "Quotes & Entities", "Café Encodings",
)
_KINDS = (
    "Reference", "Tutorial", "How-To", "FAQ", "Cookbook", "Overview", "Internals", "Examples",
    "Troubleshooting", "Best Practices",
)
_CONTEXTS = (
    "", "", "", " at Scale", " in Tests", " on Lambda", " Locally", " for Large Sites", " with Moto",
    " behind a Proxy", " in Production", " for Beginners",
)
# fmt: on


@dataclass(frozen=True)
class Section:
    """A section: its pages are the contiguous indexes `first` to `stop - 1`."""

    index: int
    name: str
    slug: str
    first: int
    stop: int
    name_html: str
    """`name` escaped for HTML, computed once: every page of the section repeats it."""

    @property
    def path(self) -> str:
        """Path of the section's index page."""
        return f"/docs/{self.slug}/index.html"


@dataclass(frozen=True)
class DocPage:
    """One article; `changed_in` is the last version (0 = never) in which its content changed."""

    index: int
    title: str
    slug: str
    section: Section
    changed_in: int
    title_html: str
    """`title` escaped for HTML, computed once: hundreds of pages link to this one."""

    @property
    def path(self) -> str:
        """Path of the article, e.g. `/docs/retries/tuning-backoff-reference.html`."""
        return f"/docs/{self.section.slug}/{self.slug}.html"


def _sections(pages: int) -> tuple[Section, ...]:
    count = -(-pages // PAGES_PER_SECTION)
    result = []
    for k in range(count):
        base = _SECTIONS[k % len(_SECTIONS)]
        name = base if k < len(_SECTIONS) else f"{base} {k // len(_SECTIONS) + 1}"
        result.append(Section(k, name, slugify(name), k * pages // count, (k + 1) * pages // count, escape(name)))
    return tuple(result)


def _title(form: int, verb: str, subject: str, kind: str, context: str) -> str:
    if form == 0:
        return f"{verb} {subject}{context}"
    if form == 1:
        bare = subject.removeprefix("the ")
        return f"{bare[0].upper()}{bare[1:]}{context}: {kind}"
    return f"{kind}: {subject.removeprefix('the ').title()}{context}"


def _titles(pages: int, seed: int) -> list[str]:
    """Unique titles: a few redraws on a collision (bounded), then a `(part n)` suffix."""
    gen = rng(f"{seed}/docs/titles")
    seen: set[str] = set()
    titles: list[str] = []
    for _ in range(pages):
        title = ""
        for _attempt in range(8):
            title = _title(
                gen.randrange(3), gen.choice(_VERBS), gen.choice(_SUBJECTS), gen.choice(_KINDS), gen.choice(_CONTEXTS)
            )
            if title not in seen:
                break
        base, part = title, 2
        while title in seen:  # ends: each pass tries a new suffix, at most `pages` are taken
            title, part = f"{base} (part {part})", part + 1
        seen.add(title)
        titles.append(title)
    return titles


def _changed_in(pages: int, seed: int, version: int, changed_fraction: float) -> list[int]:
    """Per page, the last version that changed it: each version changes a seeded sample of pages."""
    result = [0] * pages
    per_version = round(changed_fraction * pages)
    for v in range(1, version + 1):
        for index in rng(f"{seed}/docs/changes/{v}").sample(range(pages), per_version):
            result[index] = v
    return result


class DocsPlan:
    """Sections and articles of a docs site of `pages` articles, at `version`."""

    def __init__(self, pages: int, seed: int, version: int, changed_fraction: float) -> None:
        self.seed = seed
        self.sections = _sections(pages)
        owner = [s for s in self.sections for _ in range(s.first, s.stop)]
        changed = _changed_in(pages, seed, version, changed_fraction)
        slugs: set[str] = set()
        self.pages: list[DocPage] = []
        for index, title in enumerate(_titles(pages, seed)):
            slug = slugify(title)
            # `index` is the section page's name; titles are unique but their slugs may not be.
            if slug in slugs or slug == "index":
                slug = f"{slug}-{index}"
            slugs.add(slug)
            self.pages.append(DocPage(index, title, slug, owner[index], changed[index], escape(title)))

    def related(self, page: DocPage) -> list[DocPage]:
        """Pages of other sections linked from the article's text, in a seeded order.

        At least RELATED_LINKS, and enough that sidebar plus text reach MIN_LINKS distinct pages.
        """
        section = page.section
        own = section.stop - section.first
        others = len(self.pages) - own
        # Sidebar: the other pages of the section, every section index, the docs index.
        sidebar = own - 1 + len(self.sections) + 1
        count = min(others, max(RELATED_LINKS, MIN_LINKS - sidebar))
        picks = rng(f"{self.seed}/docs/related/{page.index}").sample(range(others), count)
        # Number the other sections' pages 0..others-1, skipping the page's own section.
        return [self.pages[j if j < section.first else j + own] for j in picks]

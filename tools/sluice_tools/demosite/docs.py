"""The link-heavy documentation site under /docs/: maps paths to pre-rendered, cached pages.

Paths: `/docs/index.html`, one `/docs/{section}/index.html` per section (ceil(pages / 100)
sections) and `/docs/{section}/{slug}.html` per article. With the default 2,000 articles that is
2,021 pages (2,000 + 20 section indexes + the docs index), all within two hops of the docs index;
a breadth-first crawl that drops fragments and `?highlight=` queries finds exactly that many.
Every article links to at least min(200, pages + sections) distinct in-scope pages besides itself.

Versions: each version rewrites a seeded `changed_fraction` of the articles (text, "last updated",
ETag, Last-Modified); the other articles and all indexes keep identical bytes and validators.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from . import docsrender
from .docsplan import DocPage, DocsPlan, Section
from .page import Page

_INDEX = "/docs/index.html"


class DocsSite:
    """The docs pages of one content version; the plan is built on first use (cheap to construct)."""

    def __init__(self, pages: int = 2000, seed: int = 0, version: int = 0, changed_fraction: float = 0.0) -> None:
        if pages < 1 or version < 0 or not 0.0 <= changed_fraction <= 1.0:
            raise ValueError("need docs_pages >= 1, version >= 0, 0 <= changed_fraction <= 1")
        self.version = version
        self._args = (pages, seed, version, changed_fraction)
        self._plan: DocsPlan | None = None
        self._routes: dict[str, DocPage | Section | None] = {}
        """Path -> its article or section (None: the docs index)."""
        self._cache: dict[str, Page] = {}
        self._lock = threading.Lock()

    @property
    def plan(self) -> DocsPlan:
        """Sections and articles (built once, under a lock: the server and tests may race)."""
        if self._plan is None:
            with self._lock:
                if self._plan is None:
                    plan = DocsPlan(*self._args)
                    routes: dict[str, DocPage | Section | None] = {_INDEX: None}
                    routes.update((s.path, s) for s in plan.sections)
                    routes.update((p.path, p) for p in plan.pages)
                    self._routes = routes
                    self._plan = plan
        return self._plan

    @property
    def changed_paths(self) -> frozenset[str]:
        """Articles whose content changed in this version (empty at version 0)."""
        return frozenset(p.path for p in self.plan.pages if self.version and p.changed_in == self.version)

    def paths(self) -> Iterator[str]:
        """The docs index, every section index, every article."""
        plan = self.plan
        yield _INDEX
        yield from (s.path for s in plan.sections)
        yield from (p.path for p in plan.pages)

    def get(self, path: str) -> Page | None:
        """The page at `path`, rendered on first use and cached; None when there is none."""
        page = self._cache.get(path)
        if page is not None:
            return page
        plan = self.plan
        if path not in self._routes:
            return None
        match self._routes[path]:
            case DocPage() as article:
                page = Page.html(docsrender.article(plan, article), article.changed_in)
            case Section() as section:
                page = Page.html(docsrender.section_index(plan, section))
            case None:
                page = Page.html(docsrender.index(plan))
        # Bounded: only the pages' own paths are ever cached.
        with self._lock:
            self._cache[path] = page
        return page

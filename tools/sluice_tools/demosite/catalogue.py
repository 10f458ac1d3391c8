"""The deterministic book catalogue: maps site paths to pre-rendered, cached pages (docs.py: /docs/)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

from . import render, sitemaps
from .books import CATEGORIES, Book, category_slug, generate_books
from .docs import DocsSite
from .page import Page, version_time

_DETAIL = re.compile(r"/catalogue/([a-z0-9-]+)_(\d+)/index\.html")
_LISTING = re.compile(r"/catalogue/page-(\d+)\.html")
_CATEGORY = re.compile(r"/catalogue/category/([a-z0-9-]+_\d+)/(?:index|page-(\d+))\.html")


class Catalogue:
    """Books-to-Scrape-like content, fully determined by the constructor arguments."""

    def __init__(
        self,
        books: int = 1000,
        per_page: int = 20,
        seed: int = 0,
        heavy: bool = False,
        version: int = 0,
        changed_fraction: float = 0.0,
        broken_selector: bool = False,
        docs_pages: int = 2000,
        published: float | None = None,
    ) -> None:
        if books < 1 or per_page < 1 or version < 0 or not 0.0 <= changed_fraction <= 1.0:
            raise ValueError("need books >= 1, per_page >= 1, version >= 0, 0 <= fraction <= 1")
        self.args = (books, per_page, seed, heavy, version, changed_fraction, broken_selector, docs_pages)
        # One version knob for all content: a new version re-prices books and rewrites docs pages.
        self.docs = DocsSite(docs_pages, seed, version, changed_fraction)
        self.per_page = per_page
        self.version = version
        self.published = time.time() if published is None else published
        """When this version went live (epoch seconds; default: now): the lastmod of the pages it changed."""
        self.books: list[Book] = generate_books(books, seed, version, changed_fraction)
        self.pages = -(-books // per_page)
        self.style = render.Style(
            seed=seed,
            price_class="price-colour" if broken_selector else "price_color",
            blurb_chars=14_600 if heavy else 1_380,
            per_page=per_page,
            chrome_rows=12 if heavy else 0,
        )
        self._by_category: list[list[Book]] = [[] for _ in CATEGORIES]
        for book in self.books:
            self._by_category[book.category].append(book)
        self._category_index = {category_slug(i): i for i in range(len(CATEGORIES))}
        self._cache: dict[str, Page | None] = {}
        self._sitemaps: dict[str, Page] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        names = ("books", "per_page", "seed", "heavy", "version", "changed_fraction", "broken_selector", "docs_pages")
        return f"Catalogue({', '.join(f'{n}={v!r}' for n, v in zip(names, self.args, strict=True))})"

    @property
    def changed_ids(self) -> frozenset[int]:
        """Ids of books whose price differs from the previous version (empty at version 0)."""
        return frozenset(b.id for b in self.books if self.version and b.changed_in == self.version)

    def listing_path(self, page: int) -> str:
        """Path of listing page `page` (1-based)."""
        return f"/catalogue/page-{page}.html"

    def detail_path(self, book: Book) -> str:
        """Path of a book's detail page."""
        return f"/catalogue/{book.slug}/index.html"

    def paths(self) -> Iterator[str]:
        """Every listing, category and detail page path."""
        yield from (self.listing_path(n) for n in range(1, self.pages + 1))
        for index, members in enumerate(self._by_category):
            pages = max(1, -(-len(members) // self.per_page))
            base = f"/catalogue/category/{category_slug(index)}/"
            yield base + "index.html"
            yield from (f"{base}page-{n}.html" for n in range(2, pages + 1))
        yield from (self.detail_path(b) for b in self.books)

    def get(self, path: str) -> Page | None:
        """The page at `path` (/docs/ paths are `docs` pages), rendered on first use and cached; None if none."""
        if path.startswith("/docs/"):
            return self.docs.get(path)
        try:
            return self._cache[path]
        except KeyError:
            pass
        page = self._render(path)
        with self._lock:
            if len(self._cache) < 200_000:
                self._cache[path] = page
        return page

    def sitemap(self, base_url: str, path: str = "/sitemap.xml") -> Page | None:
        """The sitemap at ``path`` (``/sitemap.xml``, or sitemaps.py's index and its two children), with absolute
        URLs under ``base_url``; None if there is none."""
        key = f"{base_url}{path}"
        cached = self._sitemaps.get(key)
        if cached is not None:
            return cached
        page = self._render_sitemap(path, base_url)
        if page is not None and len(self._sitemaps) < 64:
            self._sitemaps[key] = page
        return page

    def _render_sitemap(self, path: str, base_url: str) -> Page | None:
        listings = [
            (base_url + self.listing_path(n), self.lastmod(self._listing_books(n))) for n in range(1, self.pages + 1)
        ]
        books = [(base_url + self.detail_path(b), self.lastmod([b])) for b in self.books]
        if path in ("/sitemap.xml", sitemaps.LISTINGS_PATH):
            return sitemaps.xml_page(sitemaps.urlset(listings))
        if path == sitemaps.BOOKS_PATH:
            return sitemaps.gzip_page(sitemaps.urlset(books))
        if path == sitemaps.INDEX_PATH:
            children = [
                (base_url + sitemaps.LISTINGS_PATH, max(at for _, at in listings)),
                (base_url + sitemaps.BOOKS_PATH, max(at for _, at in books)),
            ]
            return sitemaps.xml_page(sitemaps.sitemap_index(children))
        return None

    def lastmod(self, books: list[Book]) -> float:
        """When the last of ``books`` changed: this version's publication, or an older version's fixed day."""
        changed = max((b.changed_in for b in books), default=0)
        return self.published if self.version and changed == self.version else float(version_time(changed))

    def _listing_books(self, page: int) -> list[Book]:
        return self.books[(page - 1) * self.per_page : page * self.per_page]

    def _page(self, text: str, books: list[Book]) -> Page:
        return Page.html(text, max((b.changed_in for b in books), default=0))

    def _render(self, path: str) -> Page | None:
        if match := _LISTING.fullmatch(path):
            n = int(match[1])
            if not 1 <= n <= self.pages or match[1] != str(n):
                return None
            books = self._listing_books(n)
            text = render.listing(books, len(self.books), n, self.pages, self.style, category=None)
            return self._page(text, books)
        if match := _DETAIL.fullmatch(path):
            book_id = int(match[2])
            if not 1 <= book_id <= len(self.books) or path != self.detail_path(self.books[book_id - 1]):
                return None
            book = self.books[book_id - 1]
            return self._page(render.detail(book, self.style), [book])
        if match := _CATEGORY.fullmatch(path):
            return self._category(match[1], int(match[2] or 1))
        if path.startswith("/private/"):
            return Page.html(render.private(path))
        return None

    def _category(self, slug: str, n: int) -> Page | None:
        index = self._category_index.get(slug)
        if index is None:
            return None
        members = self._by_category[index]
        pages = max(1, -(-len(members) // self.per_page))
        if not 1 <= n <= pages:
            return None
        books = members[(n - 1) * self.per_page : n * self.per_page]
        text = render.listing(books, len(members), n, pages, self.style, category=index)
        return self._page(text, books)

"""Shared fixtures: Books-to-Scrape listing markup and the spec that crawls it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from sluice.spec import CrawlSpec, parse_spec

PAGE_URL = "https://books.toscrape.com/catalogue/category/books_1/page-1.html"
_RATINGS = ("One", "Two", "Three", "Four", "Five")
_CATEGORIES = [
    *("Travel", "Mystery", "Historical Fiction", "Sequential Art", "Classics", "Philosophy", "Romance"),
    *("Womens Fiction", "Fiction", "Childrens", "Religion", "Nonfiction", "Music", "Default"),
    *("Science Fiction", "Sports and Games", "Add a comment", "Fantasy", "New Adult", "Young Adult"),
    *("Science", "Poetry", "Paranormal", "Art", "Psychology", "Autobiography", "Parenting"),
    *("Adult Fiction", "Humor", "Horror", "History", "Food and Drink", "Christian Fiction", "Business"),
    *("Biography", "Thriller", "Contemporary", "Spirituality", "Academic", "Self Help", "Historical"),
    *("Christian", "Suspense", "Short Stories", "Novels", "Health", "Politics", "Cultural", "Erotica"),
    "Crime",
]
# The real site indents deeply; this padding brings the page to its real size (about 50 KB).
_PAD = " " * 140
_WARNING = (
    "<strong>Warning!</strong> This is a demo website for web scraping purposes. "
    "Prices and ratings here were randomly assigned and have no real meaning."
)

BOOKS_SPEC: dict[str, Any] = {
    "name": "books-toscrape",
    "seeds": ["https://books.toscrape.com/catalogue/page-1.html"],
    "follow": {"selectors": ["li.next a"], "allowed_domains": ["books.toscrape.com"]},
    "extract": {
        "item": "article.product_pod",
        "fields": {
            "title": {"selector": "h3 a::attr(title)", "required": True},
            "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"], "required": True},
            "price": {"selector": "p.price_color::text", "process": ["strip", "price"], "required": True},
            "rating": {"selector": "p.star-rating::attr(class)", "process": [{"regex": r"star-rating (\w+)"}]},
            "in_stock": {"selector": "p.availability", "process": ["collapse_whitespace"]},
        },
        "key": ["url"],
    },
}


def product_pod(n: int, title: str | None = None, price: str | None = None) -> str:
    """One ``article.product_pod`` as books.toscrape.com writes it."""
    title = title if title is not None else f"A Light in the Attic {n}"
    slug = f"a-light-in-the-attic-{n}_{1000 - n}"
    price = price if price is not None else f"£{10 + n}.{n % 100:02d}"
    image = f'<img src="../../../media/cache/2c/da/{n:04d}.jpg" alt="{title}" class="thumbnail">'
    stars = "\n".join(['                    <i class="icon-star"></i>'] * 5)
    return f"""
        <li class="col-xs-6 col-sm-4 col-md-3 col-lg-3">
    <article class="product_pod">
            <div class="image_container">
                    <a href="../../../{slug}/index.html">{image}</a>
            </div>
                <p class="star-rating {_RATINGS[n % 5]}">
{stars}
                </p>
            <h3><a href="../../../{slug}/index.html" title="{title}">{title[:20]}...</a></h3>
            <div class="product_price">
        <p class="price_color">{price}</p>
<p class="instock availability">
    <i class="icon-ok"></i>

        In stock

</p>
    <form>
        <button type="submit" class="btn btn-primary btn-block" data-loading-text="Adding...">Add to basket</button>
    </form>
            </div>
    </article>
</li>"""


def _category(index: int, name: str) -> str:
    href = f"../category/books/{name.lower().replace(' ', '-')}_{index + 2}/index.html"
    return f"""                        <li>
                            <a href="{href}">
{_PAD}
                                {name}
{_PAD}
                            </a>
                        </li>"""


def listing_page(pods: list[str], next_href: str | None = "page-2.html", head_extra: str = "") -> str:
    """A Books-to-Scrape listing page around ``pods``."""
    categories = "\n".join(_category(i, c) for i, c in enumerate(_CATEGORIES))
    pager = f'<li class="next"><a href="{next_href}">next</a></li>' if next_href else ""
    return f"""<!DOCTYPE html>
<!--[if lt IE 7]>      <html lang="en-us" class="no-js lt-ie9 lt-ie8 lt-ie7"> <![endif]-->
<html lang="en-us" class="no-js">
    <head>
        <title>All products | Books to Scrape - Sandbox</title>
        <meta http-equiv="content-type" content="text/html; charset=UTF-8" />
        <meta name="created" content="24th Jun 2016 09:29" />
        <meta name="viewport" content="width=device-width" />
        <meta name="robots" content="NOARCHIVE,NOCACHE" />{head_extra}
        <link rel="shortcut icon" href="../static/oscar/favicon.ico" />
        <link rel="stylesheet" type="text/css" href="../static/oscar/css/styles.css" />
    </head>
    <body id="default" class="default">
        <header class="header container-fluid">
            <div class="page_inner">
                <div class="row">
                    <div class="col-sm-8 h1">
                        <a href="../index.html">Books to Scrape</a><small> We love being scraped!</small>
                    </div>
                </div>
            </div>
        </header>
        <div class="container-fluid page">
            <div class="page_inner">
                <ul class="breadcrumb">
                    <li><a href="../index.html">Home</a></li>
                    <li class="active">All products</li>
                </ul>
                <div class="row">
                    <aside class="sidebar col-sm-4 col-md-3">
                        <div id="promotions_left"></div>
                        <div class="side_categories">
                            <ul class="nav nav-list">
                                <li><a href="../category/books_1/index.html">Books</a>
                                    <ul>
{categories}
                                    </ul>
                                </li>
                            </ul>
                        </div>
                    </aside>
                    <div class="col-sm-8 col-md-9">
                        <div class="page-header action"><h1>All products</h1></div>
                        <form method="get" class="form-horizontal">
                            <strong>1000</strong> results - showing <strong>1</strong> to <strong>20</strong>.
                        </form>
                        <section>
                            <div class="alert alert-warning" role="alert">{_WARNING}</div>
                            <div>
                                <ol class="row">
{"".join(pods)}
                                </ol>
                                <div>
                                    <ul class="pager">
                                        <li class="current">Page 1 of 50</li>
                                        {pager}
                                    </ul>
                                </div>
                            </div>
                        </section>
                    </div>
                </div>
            </div>
        </div>
        <footer class="footer container-fluid"></footer>
        <script src="../static/oscar/js/jquery/jquery-1.9.1.min.js" type="text/javascript"></script>
        <script type="text/javascript">$(function() {{ oscar.init(); oscar.search.init(); }});</script>
    </body>
</html>
"""


def books_spec(**changes: Any) -> CrawlSpec:
    """The Books-to-Scrape spec, with top-level sections replaced by ``changes``."""
    return parse_spec({**BOOKS_SPEC, **changes})


@pytest.fixture
def spec() -> CrawlSpec:
    """The Books-to-Scrape spec."""
    return books_spec()


@pytest.fixture
def spec_data() -> dict[str, Any]:
    """The Books-to-Scrape spec as plain data, a copy the test may change."""
    return copy.deepcopy(BOOKS_SPEC)


@pytest.fixture
def make_spec() -> Callable[..., CrawlSpec]:
    """``make_spec(follow=..., extract=...)``: the Books-to-Scrape spec with sections replaced."""
    return books_spec


@pytest.fixture
def pod() -> Callable[..., str]:
    """``pod(n, title=None, price=None)``: one product card."""
    return product_pod


@pytest.fixture
def listing() -> Callable[..., str]:
    """``listing(pods, next_href='page-2.html', head_extra='')``: a whole listing page."""
    return listing_page


@pytest.fixture
def page() -> str:
    """A 20-book listing page (about 50 KB) with a next link."""
    return listing_page([product_pod(n) for n in range(1, 21)])


@pytest.fixture
def encoders_built(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many C JSON encoders were built since the test began (``JSONEncoder.encode`` builds one per call)."""
    import json.encoder

    built = 0
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    assert make is not None

    def counting(*args: Any) -> Any:
        nonlocal built
        built += 1
        return make(*args)

    monkeypatch.setattr(json.encoder, "c_make_encoder", counting)
    return lambda: built

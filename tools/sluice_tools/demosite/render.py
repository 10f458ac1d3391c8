"""HTML for listing, category and detail pages in the Books-to-Scrape markup."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from . import layout
from .books import CATEGORIES, Book, category_slug, lorem


@dataclass(frozen=True)
class Style:
    """Rendering options shared by all pages of one catalogue."""

    seed: int
    price_class: str
    blurb_chars: int
    per_page: int
    chrome_rows: int = 0
    """Rows of icons, badges and data-* attributes on each listing card (a heavy page's realistic markup)."""


def _short(title: str) -> str:
    return title if len(title) <= 30 else title[:28].rstrip() + "…"


_ICON = (
    '<svg class="icon" viewBox="0 0 24 24" width="16" height="16" aria-hidden="true" focusable="false">'
    '<g fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round">'
    '<path d="M3 3h2l.4 2M7 13h10l4-8H5.4M7 13L5.4 5M7 13l-2.3 2.3c-.6.6-.2 1.7.7 1.7H17"/>'
    '<circle cx="9" cy="20" r="1"/><circle cx="17" cy="20" r="1"/></g></svg>'
)


def _chrome(book: Book, n: int) -> str:
    """What a real shop's card carries besides its data: tracking attributes, icons, badges, menus."""
    rows = "".join(
        f'<li class="spec-row" data-row="{i}" data-track="card:{book.id}:spec:{i}">'
        f'<span class="spec-label"><span class="sr-only">Spec</span> {i}</span>'
        f'<span class="spec-value" data-value="{book.upc}-{i}"><em>v{i}</em></span></li>\n'
        for i in range(n)
    )
    return (
        f'<div class="card-chrome" data-analytics=\'{{"id":{book.id},"list":"catalogue","pos":{book.id % 20}}}\''
        f' data-upc="{book.upc}">\n<nav class="card-actions" aria-label="actions">'
        + "".join(f'<button type="button" class="icon-btn" data-action="a{i}">{_ICON}</button>' for i in range(4))
        + f'</nav>\n<ul class="specs">\n{rows}</ul>\n</div>\n'
    )


def _card(book: Book, href_prefix: str, style: Style) -> str:
    title = escape(book.title)
    href = f"{href_prefix}{book.slug}/index.html"
    blurb = lorem(style.seed, book.id, style.blurb_chars)
    paragraphs = "".join(f"<p>{escape(blurb[i : i + 2000])}</p>\n" for i in range(0, len(blurb), 2000))
    chrome = _chrome(book, style.chrome_rows) if style.chrome_rows else ""
    return (
        '<li class="col-xs-6 col-sm-4 col-md-3 col-lg-3">\n<article class="product_pod">\n'
        f'<div class="image_container">\n<a href="{href}"><img src="/media/cache/{book.upc}.jpg"'
        f' alt="{title}" class="thumbnail"></a>\n</div>\n{layout.stars(book.rating)}'
        f'<h3><a href="{href}" title="{title}">{escape(_short(book.title))}</a></h3>\n'
        f'<div class="product_price">\n<p class="{style.price_class}">{book.price}</p>\n'
        '<p class="instock availability">In stock</p>\n'
        '<form><button type="submit" class="btn btn-primary btn-block">Add to basket</button>'
        f'</form>\n</div>\n{chrome}<div class="description">\n{paragraphs}</div>\n</article>\n</li>\n'
    )


def _pager(page: int, pages: int, first: str) -> str:
    prev = first if page == 2 else f"page-{page - 1}.html"
    items = f'<li class="previous"><a href="{prev}">previous</a></li>\n' if page > 1 else ""
    items += f'<li class="current">\n    Page {page} of {pages}\n</li>\n'
    if page < pages:
        items += f'<li class="next"><a href="page-{page + 1}.html">next</a></li>\n'
    return f'<div>\n<ul class="pager">\n{items}</ul>\n</div>\n'


def listing(books: Sequence[Book], total: int, page: int, pages: int, style: Style, *, category: int | None) -> str:
    """One listing page (all products, or one category) holding `books`."""
    heading = "All products" if category is None else CATEGORIES[category]
    start = (page - 1) * style.per_page + 1
    cards = "".join(_card(b, "" if category is None else "../../", style) for b in books)
    content = (
        f'<div class="page-header action">\n<h1>{escape(heading)}</h1>\n</div>\n'
        f'<form method="get" class="form-horizontal"><strong>{total}</strong> results - showing '
        f"<strong>{start}</strong> to <strong>{start + len(books) - 1}</strong>.</form>\n"
        '<section>\n<div class="alert alert-warning" role="alert"><strong>Warning!</strong> '
        "This is a demo website for web scraping purposes. Prices and ratings here were randomly"
        " assigned and have no real meaning.</div>\n"
        f'<div>\n<ol class="row">\n{cards}</ol>\n'
        f"{_pager(page, pages, 'page-1.html' if category is None else 'index.html')}"
        "</div>\n</section>\n"
    )
    crumb = f'<li class="active">{escape(heading)}</li>\n'
    return layout.page(heading, crumb, content)


def structured_data(book: Book, url: str) -> str:
    """A book page's structured data: JSON-LD (a schema.org ``Product`` with its ``Offer``) and OpenGraph."""
    price = f"{book.price_pence // 100}.{book.price_pence % 100:02d}"
    availability = "https://schema.org/InStock" if book.stock > 0 else "https://schema.org/OutOfStock"
    product = {
        "@context": "https://schema.org",
        "@type": "Product",
        "name": book.title,
        "sku": book.upc,
        "category": CATEGORIES[book.category],
        "offers": {"@type": "Offer", "price": price, "priceCurrency": "GBP", "availability": availability},
    }
    # "</" would end the script element early: JSON allows "<\/" for it.
    block = json.dumps(product, ensure_ascii=False).replace("</", "<\\/")
    metas = (
        ("og:type", "product"),
        ("og:title", book.title),
        ("og:url", url),
        ("og:image", f"/media/cache/{book.upc}.jpg"),
        ("product:price:amount", price),
        ("product:price:currency", "GBP"),
    )
    tags = "".join(f'<meta property="{p}" content="{escape(v)}" />\n' for p, v in metas)
    return f'<script type="application/ld+json">{block}</script>\n{tags}'


def detail(book: Book, style: Style) -> str:
    """The product page of one book."""
    title = escape(book.title)
    stock = f"In stock ({book.stock} available)"
    listing_page = (book.id - 1) // style.per_page + 1
    rows = (
        ("UPC", book.upc),
        ("Product Type", "Books"),
        ("Price (excl. tax)", book.price),
        ("Price (incl. tax)", book.price),
        ("Tax", "£0.00"),
        ("Availability", stock),
        ("Number of reviews", str(book.reviews)),
    )
    table = "".join(f"<tr>\n<th>{k}</th><td>{escape(v)}</td>\n</tr>\n" for k, v in rows)
    cat = category_slug(book.category)
    content = (
        '<article class="product_page">\n<div class="row">\n<div class="col-sm-6">\n'
        f'<div id="product_gallery" class="carousel"><img src="/media/cache/{book.upc}.jpg"'
        f' alt="{title}" /></div>\n</div>\n'
        f'<div class="col-sm-6 product_main">\n<h1>{title}</h1>\n'
        f'<p class="{style.price_class}">{book.price}</p>\n'
        f'<p class="instock availability">\n    <i class="icon-ok"></i>\n    {stock}\n</p>\n'
        f"{layout.stars(book.rating)}</div>\n</div>\n"
        '<div id="product_description" class="sub-header">\n<h2>Product Description</h2>\n</div>\n'
        f"<p>{escape(lorem(style.seed, -book.id, 1500))}</p>\n"
        '<div class="sub-header">\n<h2>Product Information</h2>\n</div>\n'
        f'<table class="table table-striped">\n{table}</table>\n'
        f'<p><a href="../page-{listing_page}.html">Back to catalogue page {listing_page}</a>'
        f' · <a href="../category/{cat}/index.html">More {escape(CATEGORIES[book.category])}</a></p>\n'
        "</article>\n"
    )
    crumb = (
        f'<li><a href="/catalogue/category/{cat}/index.html">'
        f'{escape(CATEGORIES[book.category])}</a></li>\n<li class="active">{title}</li>\n'
    )
    head = structured_data(book, f"/catalogue/{book.slug}/index.html")
    return layout.page(book.title, crumb, content, head)


def private(path: str) -> str:
    """A page under /private/ (disallowed by robots.txt)."""
    content = f"<h1>Staff only</h1>\n<p>{escape(path)} is reserved for staff.</p>\n"
    return layout.page("Staff only", '<li class="active">Staff</li>\n', content)

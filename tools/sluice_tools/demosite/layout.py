"""Page chrome shared by all catalogue pages: head, header, category sidebar and footer."""

from __future__ import annotations

from functools import lru_cache
from html import escape

from .books import CATEGORIES, category_slug


@lru_cache(maxsize=1)
def _sidebar() -> str:
    items = "".join(
        f'<li>\n<a href="/catalogue/category/{category_slug(i)}/index.html">\n    {escape(name)}\n</a>\n</li>\n'
        for i, name in enumerate(CATEGORIES)
    )
    return (
        '<aside class="sidebar col-sm-4 col-md-3">\n<div id="promotions_left"></div>\n'
        '<div class="side_categories">\n<ul class="nav nav-list">\n<li>\n'
        '<a href="/catalogue/page-1.html">Books</a>\n<ul>\n'
        f"{items}</ul>\n</li>\n</ul>\n</div>\n</aside>\n"
    )


def page(title: str, breadcrumb: str, content: str, head: str = "") -> str:
    """Wrap `content` in the full Books-to-Scrape-like document; `head` goes at the end of its `<head>`."""
    return (
        '<!DOCTYPE html>\n<html lang="en-us" class="no-js">\n<head>\n'
        f"<title>\n    {escape(title)} | Books to Scrape - Sandbox\n</title>\n"
        '<meta http-equiv="content-type" content="text/html; charset=UTF-8" />\n'
        '<meta name="description" content="A deterministic demo catalogue for crawl tests." />\n'
        '<meta name="viewport" content="width=device-width" />\n'
        '<meta name="robots" content="NOARCHIVE,NOCACHE" />\n'
        f'{head}</head>\n<body id="default" class="default">\n'
        '<header class="header container-fluid">\n<div class="page_inner">\n<div class="row">\n'
        '<div class="col-sm-8 h1"><a href="/catalogue/page-1.html">Books to Scrape</a>'
        "<small> We love being scraped!</small>\n</div>\n</div>\n</div>\n</header>\n"
        '<div class="container-fluid page">\n<div class="page_inner">\n'
        f'<ul class="breadcrumb">\n<li><a href="/index.html">Home</a></li>\n{breadcrumb}</ul>\n'
        f'<div class="row">\n{_sidebar()}<div class="col-sm-8 col-md-9">\n{content}</div>\n'
        "</div>\n</div>\n</div>\n"
        '<footer class="footer container-fluid">\n<p>Sluice demo catalogue. '
        '<a href="/sitemap.xml">Sitemap</a> · <a href="/private/staff.html">Staff area</a></p>\n'
        "</footer>\n</body>\n</html>\n"
    )


def stars(rating: str) -> str:
    """The star-rating paragraph, e.g. `<p class="star-rating Three">`."""
    icons = '<i class="icon-star"></i>' * 5
    return f'<p class="star-rating {rating}">\n    {icons}\n</p>\n'

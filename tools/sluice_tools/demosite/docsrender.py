"""HTML of the documentation site: the docs index, section indexes and articles (Sphinx-like markup).

Crawl-relevant markup: `nav.docs-nav` (sidebar) and `main.docs-body` (text) hold the links; the
header and each article link out of /docs/ (to the catalogue), the footer and "Edit" links leave the host.
"""

from __future__ import annotations

import random
import time
from functools import lru_cache
from html import escape

from .books import rng
from .docsplan import DocPage, DocsPlan, Section
from .page import version_time

# fmt: off
_WORDS = (
    "crawl", "run", "page", "link", "record", "spec", "seed", "frontier", "fetch", "retry", "request",
    "response", "header", "validator", "selector", "field", "queue", "worker", "batch", "limit", "delay",
    "host", "domain", "robots", "sitemap", "schedule", "alert", "metric", "ledger", "claim", "key",
    "the", "a", "each", "every", "one", "is", "are", "keeps", "sends", "reads", "writes", "skips",
    "follows", "counts", "waits", "when", "after", "before", "once", "so", "and", "or", "but", "not",
    "with", "from", "to", "of", "in", "on", "by", "per", "its", "their", "new", "old", "same", "next",
)
_HEADINGS = (
    "Before you begin", "Options", "How it works", "Limits", "Troubleshooting", "Defaults",
    "Common mistakes", "Performance", "Security notes", "Migration", "Design notes", "Glossary",
)
# fmt: on
ANCHORS = ("overview", "example", "see-also")
"""Heading ids every article has; some in-text links point at them with fragments."""
FRAGMENT_EVERY = 9
"""Every 9th related link carries a fragment; "See also" lists those pages again with plain hrefs."""


def _date(version: int) -> tuple[str, str]:
    when = time.gmtime(version_time(version))
    return time.strftime("%Y-%m-%d", when), f"{when.tm_mday} {time.strftime('%B %Y', when)}"


@lru_cache(maxsize=8)
def _sentences(seed: int) -> tuple[tuple[str, ...], float]:
    """A pool of filler sentences and their mean length: articles pick from it, which is ~5x faster
    than drawing every word (the render cost is paid on a page's first request)."""
    gen = rng(f"{seed}/docs/sentences")
    pool = tuple(" ".join(gen.choices(_WORDS, k=gen.randint(8, 18))).capitalize() + "." for _ in range(2048))
    return pool, sum(map(len, pool)) / len(pool)


def _related_link(page: DocPage, position: int) -> str:
    """An in-text link to another section's page: root-relative or `../` by turns, some with a fragment."""
    href = page.path if position % 2 else f"../{page.section.slug}/{page.slug}.html"
    if position % FRAGMENT_EVERY == FRAGMENT_EVERY // 2:
        href += f"#{ANCHORS[position % len(ANCHORS)]}"
    return f'<a class="reference internal" href="{href}">{page.title_html}</a>'


def _highlight_link(gen: random.Random, plan: DocsPlan, page: DocPage) -> list[str]:
    """A search-result style link to a page of the same section (so also in the sidebar, plainly)."""
    section = page.section
    if section.stop - section.first < 2:
        return []
    target = plan.pages[section.first + gen.randrange(section.stop - section.first)]
    if target is page:
        target = plan.pages[section.first if page.index + 1 == section.stop else page.index + 1]
    return [f'<a href="{target.slug}.html?highlight={gen.choice(_WORDS)}">{target.title_html}</a>']


def _nav(plan: DocsPlan, section: Section | None, current: int | None) -> str:
    """The sidebar: every section index, then the pages of `section` (the current one marked)."""
    up = "" if section is None else "../"
    sections = "".join(
        f'<li class="toctree-l1"><a href="{up}{s.slug}/index.html">{s.name_html}</a></li>\n' for s in plan.sections
    )
    pages = ""
    if section is not None:
        pages = f'<p class="caption">{section.name_html}</p>\n<ul class="pages">\n'
        for p in plan.pages[section.first : section.stop]:
            mark = ' class="current"' if p.index == current else ""
            pages += f'<li{mark}><a href="{p.slug}.html">{p.title_html}</a></li>\n'
        pages += "</ul>\n"
    return (
        f'<nav class="docs-nav" aria-label="Documentation">\n<p class="caption">Sections</p>\n'
        f'<ul class="sections">\n{sections}</ul>\n{pages}</nav>\n'
    )


def _document(title: str, canonical: str, nav: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8" />\n'
        f"<title>{escape(title)} — Sluice demo docs</title>\n"
        f'<link rel="canonical" href="{canonical}" />\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1" />\n</head>\n<body>\n'
        '<header class="docs-header"><a href="/docs/index.html">Sluice demo docs</a> · '
        '<a href="/catalogue/page-1.html">Book shop</a></header>\n'
        f'<div class="docs-layout">\n{nav}<main class="docs-body">\n{body}</main>\n</div>\n'
        '<footer class="docs-footer"><p>Built with a deterministic generator, styled after '
        '<a href="https://www.sphinx-doc.org/">Sphinx</a>.</p></footer>\n</body>\n</html>\n'
    )


def index(plan: DocsPlan) -> str:
    """`/docs/index.html`: every section with its first pages."""
    toc = ""
    for s in plan.sections:
        first = "".join(
            f'<li><a href="{p.section.slug}/{p.slug}.html">{p.title_html}</a></li>\n'
            for p in plan.pages[s.first : min(s.stop, s.first + 5)]
        )
        toc += f'<li><a href="{s.slug}/index.html">{s.name_html}</a>\n<ul>\n{first}</ul>\n</li>\n'
    body = (
        '<article>\n<h1 id="overview">Sluice demo documentation</h1>\n'
        f"<p>{len(plan.pages)} articles in {len(plan.sections)} sections.</p>\n"
        f'<div class="toctree-wrapper">\n<ul>\n{toc}</ul>\n</div>\n</article>\n'
    )
    return _document("Sluice demo documentation", "/docs/index.html", _nav(plan, None, None), body)


def section_index(plan: DocsPlan, section: Section) -> str:
    """`/docs/{section}/index.html`: the section's table of contents."""
    toc = "".join(
        f'<li><a href="{p.slug}.html">{p.title_html}</a></li>\n' for p in plan.pages[section.first : section.stop]
    )
    body = (
        '<nav class="breadcrumb"><a href="../index.html">Docs</a> » '
        f'<a class="section" href="index.html">{section.name_html}</a></nav>\n'
        f'<article>\n<h1 id="overview">{section.name_html}</h1>\n'
        f'<div class="toctree-wrapper">\n<ul>\n{toc}</ul>\n</div>\n</article>\n'
    )
    return _document(section.name, section.path, _nav(plan, section, None), body)


def _paragraphs(gen: random.Random, seed: int, links: list[str], chars: int) -> str:
    """About `chars` of prose in paragraphs of five sentences, `links` spread evenly through it."""
    pool, mean = _sentences(seed)
    sentences = gen.choices(pool, k=max(len(links), 1, round(chars / (mean + 1))))
    for k, link in enumerate(links):
        sentences[k * len(sentences) // len(links)] += f" See {link}."
    return "".join(f"<p>{' '.join(sentences[i : i + 5])}</p>\n" for i in range(0, len(sentences), 5))


def article(plan: DocsPlan, page: DocPage) -> str:
    """An article: ~4-10 KB of prose (~33-38 KB of HTML in all) with its in-text links spread through it.

    In-text links: every related page (plan.related) once, and per heading one `?highlight=` link to
    a sidebar page; the pages linked with a fragment are listed again, plainly, under "See also".
    """
    gen = rng(f"{plan.seed}/docs/text/{page.index}/{page.changed_in}")
    related = plan.related(page)
    links = [_related_link(target, position) for position, target in enumerate(related)]
    headings = ["Overview", *gen.sample(_HEADINGS, gen.randint(3, 6)), "Example"]
    ids = ["overview", *(f"s{n}" for n in range(1, len(headings) - 1)), "example"]
    share = gen.randint(4_000, 10_000) // len(headings)
    per_heading = -(-len(links) // len(headings))
    iso, human = _date(page.changed_in)
    toc = "".join(f'<li><a href="#{i}">{escape(h)}</a></li>\n' for i, h in zip(ids, headings, strict=True))
    parts = [
        '<nav class="breadcrumb"><a href="../index.html">Docs</a> » '
        f'<a class="section" href="index.html">{page.section.name_html}</a></nav>\n'
        f"<article>\n<h1>{page.title_html}</h1>\n"
        f'<p class="last-updated">Last updated on <time datetime="{iso}">{human}</time>'
        f" (revision {page.changed_in}).</p>\n"
        f'<div class="contents"><p>On this page</p>\n<ul>\n{toc}</ul>\n</div>\n'
    ]
    for n, (anchor, heading) in enumerate(zip(ids, headings, strict=True)):
        parts.append(f'<h2 id="{anchor}">{escape(heading)}<a class="headerlink" href="#{anchor}">¶</a></h2>\n')
        mine = links[n * per_heading : (n + 1) * per_heading] + _highlight_link(gen, plan, page)
        parts.append(_paragraphs(gen, plan.seed, mine, share))
    fragmented = related[FRAGMENT_EVERY // 2 :: FRAGMENT_EVERY]
    see_also = "".join(f'<li><a href="{p.path}">{p.title_html}</a></li>\n' for p in fragmented)
    parts.append(
        f"<pre><code>sluice crawl crawls/{page.section.slug}.yaml --out {page.slug}.jsonl</code></pre>\n"
        '<p>Try it against the <a href="/catalogue/page-1.html">demo book shop</a>.</p>\n'
        f'<h2 id="see-also">See also</h2>\n<ul class="see-also">\n{see_also}</ul>\n'
        f'<p><a class="edit" href="https://github.com/example/sluice-docs/edit/main/{page.section.slug}/'
        f'{page.slug}.rst">Edit this page</a></p>\n</article>\n'
    )
    return _document(page.title, page.path, _nav(plan, page.section, page.index), "".join(parts))

"""Field selectors in the dialect Scrapy users know: CSS plus ``::text``, `` ::text`` and ``::attr(name)``.

A selector is parsed once, when the spec is validated, into a :class:`FieldSelector`;
extraction then only runs the CSS part and picks the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

Pick = Literal["text", "deep_text", "attr", "html", "page_url"]

_ATTR = re.compile(r"::attr\(\s*([A-Za-z_:][-A-Za-z0-9_:.]*)\s*\)$")
_PROBE = LexborHTMLParser("<html><body><p>probe</p></body></html>")


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: which elements (``css``, None for the item itself) and what to take."""

    source: str
    css: str | None
    pick: Pick
    attr: str | None = None


def check_css(css: str) -> str:
    """Return ``css`` stripped if lexbor can compile it, else raise ValueError naming it."""
    stripped = css.strip()
    if not stripped:
        raise ValueError("an empty string is not a valid selector")
    if not _css_compiles(stripped):
        raise ValueError(f"{css!r} is not a valid selector")
    return stripped


@lru_cache(maxsize=1024)
def _css_compiles(css: str) -> bool:
    try:
        _PROBE.css(css)
    except SelectolaxError:
        return False
    return True


def parse_field_selector(source: str) -> FieldSelector:
    """Parse ``'p.price_color::text'``, ``'h3 a::attr(title)'``, ``'div.desc ::text'`` or plain CSS.

    Plain CSS takes the element's whole text; ``::text`` its own text nodes; `` ::text``
    (with a space) every descendant text; ``::html`` the element's outer HTML; ``::page_url``
    (alone) the URL of the page the record is on.
    """
    text = source.strip()
    if not text:
        raise ValueError("an empty string is not a valid selector")
    if text == "::page_url":
        return FieldSelector(source, None, "page_url")
    if "::" not in text:
        return FieldSelector(source, check_css(text), "deep_text")
    # Leading whitespace is kept: ' ::text' is every text of the item itself, '::text' its own text.
    css, _, pseudo = source.rstrip().rpartition("::")
    pseudo = "::" + pseudo
    deep_space = css[-1:].isspace()
    css_part = css.strip() or None
    if css_part is not None and "::" in css_part:
        raise ValueError(f"{source!r} is not a valid selector: only one '::' pseudo-element is allowed")
    if css_part is not None:
        try:
            check_css(css_part)
        except ValueError:
            raise ValueError(f"{source!r} is not a valid selector") from None
    if pseudo == "::text":
        return FieldSelector(source, css_part, "deep_text" if deep_space else "text")
    if pseudo == "::html":
        return FieldSelector(source, css_part, "html")
    match = _ATTR.match(pseudo)
    if match:
        return FieldSelector(source, css_part, "attr", match.group(1))
    if pseudo.startswith("::attr("):
        raise ValueError(f"{pseudo!r} is not a valid selector: write ::attr(name)")
    if pseudo == "::page_url":
        raise ValueError(f"{source!r} is not a valid selector: ::page_url stands alone (the page's URL has no CSS)")
    raise ValueError(f"{pseudo!r} is not a valid selector: use ::text, ::attr(name), ::html or ::page_url")

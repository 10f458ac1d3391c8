"""`sluice shell SPEC URL`: a Python prompt holding the parsed page, as Scrapy's shell holds its response.

Helpers: ``css(selector)`` runs a field selector (``'h1::text'``, ``'a::attr(href)'``) over the page and
returns every value; ``field(name)`` the trace of a spec field in every item; ``links(rule)`` the links a
follow rule found, each with its fate; ``page``, ``trace`` and ``spec`` are there too.
"""

from __future__ import annotations

import code
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from sluice.extraction.charset import parser_input
from sluice.extraction.extract import _getter
from sluice.spec import CrawlSpec
from sluice.spec.selectors import parse_field_selector
from sluice_tools.authoring.page import Page
from sluice_tools.authoring.trace import FieldTrace, LinkTrace, PageTrace


class PageHelpers:
    """The shell's helpers over one parsed page."""

    def __init__(self, spec: CrawlSpec, page: Page, trace: PageTrace) -> None:
        self.spec = spec
        self.page = page
        self.trace = trace
        self.tree = LexborHTMLParser(parser_input(page.body, page.content_type))

    def css(self, selector: str) -> list[str]:
        """Every value ``selector`` (the spec's field-selector dialect) picks on the page, in page order."""
        parsed = parse_field_selector(selector)
        if parsed.pick == "page_url":
            return [self.page.final_url]
        nodes = self.tree.css(parsed.css) if parsed.css is not None else [self.tree.root]
        get = _getter(parsed)
        return [value for node in nodes if node is not None and (value := get(node)) is not None]

    def field(self, name: str) -> list[FieldTrace]:
        """The named field's trace in each item (KeyError naming the fields there are)."""
        traces = [f for item in self.trace.items for f in item.fields if f.name == name]
        if not traces and self.trace.items:
            names = [f.name for f in self.trace.items[0].fields]
            raise KeyError(f"{name!r} is not a field of this page's type (fields: {', '.join(names)})")
        return traces

    def links(self, rule: str | None = None) -> list[LinkTrace]:
        """The links a follow rule found (every link without ``rule``)."""
        return [link for link in self.trace.links if rule is None or link.rule == rule]

    def namespace(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "page": self.page,
            "trace": self.trace,
            "css": self.css,
            "field": self.field,
            "links": self.links,
        }


def interact(spec: CrawlSpec, page: Page, trace: PageTrace) -> None:
    helpers = PageHelpers(spec, page, trace)
    banner = (
        f"{page.final_url}: type {trace.type.name or '(none)'}, {len(trace.records)} record(s), "
        f"{len(trace.links)} link(s)\nhelpers: css(selector), field(name), links(rule); page, trace, spec"
    )
    code.interact(banner=banner, local=helpers.namespace(), exitmsg="")

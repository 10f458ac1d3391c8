"""Which links a run follows: ``follow`` (selectors, scope, depth) and page types with their named link rules."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from sluice.spec.extraction import Extract
from sluice.spec.seeds import MAX_SEED_URLS
from sluice.spec.values import CssSelector, FieldName, Regex, StrictModel


class Follow(StrictModel):
    """Which links a run follows, and how far."""

    selectors: list[CssSelector] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)
    allow: list[Regex] = Field(default_factory=list)
    deny: list[Regex] = Field(default_factory=list)
    max_depth: int | None = Field(default=None, ge=0, le=MAX_SEED_URLS)
    """Link hops from a seed; None (the default): as deep as links lead, within ``max_pages``."""
    max_pages: int = Field(default=10_000, ge=1, le=MAX_SEED_URLS)

    @property
    def depth_limit(self) -> int:
        """The deepest hop a run follows: ``max_depth``, or ``max_pages`` (no chain of new pages is longer)."""
        return self.max_depth if self.max_depth is not None else self.max_pages

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, domains: list[str]) -> list[str]:
        for domain in domains:
            if not re.fullmatch(r"[A-Za-z0-9.-]{1,253}(:\d{1,5})?", domain):
                raise ValueError(f"{domain!r} is not a domain name (no scheme, no path)")
        return [d.lower() for d in domains]


TypeName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
"""A page type's name: it names the type's output folder (``type=NAME/``) and its records' ``_type``."""
RuleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
MAX_CARRY_BYTES = 2048
"""Carried data a task holds at most, as compact JSON: it travels in every queue message of the link."""


class LinkRule(StrictModel):
    """A page type's named follow rule: the links its selectors find, and the fields carried along them."""

    selectors: list[CssSelector] = Field(min_length=1)
    carry: list[FieldName] = Field(default_factory=list, max_length=32)
    """Fields of the page's first record merged into the records of the pages these links lead to."""


class PageType(StrictModel):
    """One kind of page: which pages it is (URL pattern and/or the rules whose links lead there), what they hold."""

    pages: Regex | None = None
    """A URL pattern (searched, RE2) a page of this type matches."""
    via: list[RuleName] = Field(default_factory=list)
    """Follow rules (of any type) whose links lead to pages of this type; empty: any way, seeds included."""
    extract: Extract
    follow: dict[RuleName, LinkRule] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _matched(self) -> PageType:
        if self.pages is None and not self.via:
            raise ValueError("a page type needs pages (a URL pattern), via (follow rules leading to it), or both")
        if self.extract.pages is not None:
            raise ValueError("a page type's extract takes no pages pattern: give the type's pages instead")
        for name, rule in self.follow.items():
            for carried in rule.carry:
                if carried not in self.extract.fields:
                    raise ValueError(f"follow.{name}.carry names {carried!r}, which is not a field of this type")
        return self

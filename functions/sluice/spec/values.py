"""The checked values every section of a spec is built from: its error, its strict base model, and the
strings it checks on the way in (http(s) URLs, RE2 patterns, CSS selectors, field names)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from sluice.domain.pages import MAX_URL
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.urls import inspect_url
from sluice.spec.selectors import check_css

_WHITESPACE = re.compile(r"\s")


class SpecError(Exception):
    """A spec that cannot be used; ``errors`` holds one ``'path: what is wrong'`` line per problem."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: {len(errors)} error(s)\n" + "\n".join(f"  {e}" for e in errors))


class StrictModel(BaseModel):
    """Every section's base: an unknown key is an error that names it, and a spec, once read, never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def check_seed_url(value: str) -> str:
    """``value`` if a run can carry it as a seed, else ValueError saying why (the rules of ``seeds.urls``)."""
    return http_url(value)


def http_url(value: str) -> str:
    """An absolute http(s) URL as the WHATWG URL Standard parses it, without credentials, that a run can carry."""
    shown = repr(value) if len(value) <= 120 else f"{value[:100]!r}... ({len(value)} characters)"
    if len(value) > MAX_URL:
        raise ValueError(f"{shown} is longer than the {MAX_URL} characters a URL may have")
    if _WHITESPACE.search(value):
        raise ValueError(f"{shown} contains whitespace")
    if not value[:8].lower().startswith(("http://", "https://")):
        raise ValueError(f"{shown} is not an http(s) URL")
    try:
        canonical, credentials = inspect_url(value)
    except ValueError:
        raise ValueError(f"{shown} is not a valid URL (its host or port cannot be parsed)") from None
    if credentials:
        raise ValueError(
            f"{shown} carries a user name or password: credentials never go in a URL (they would be sent to the site)"
        )
    if len(canonical) > MAX_URL:
        raise ValueError(f"{shown} is longer than the {MAX_URL} characters a URL may have, once encoded")
    return value


def _regex(value: str) -> str:
    compile_pattern(value)  # PatternError (a ValueError) says what is wrong with it
    return value


HttpUrl = Annotated[str, AfterValidator(http_url)]
CssSelector = Annotated[str, BeforeValidator(lambda v: check_css(v) if isinstance(v, str) else v)]
Regex = Annotated[str, BeforeValidator(lambda v: _regex(v) if isinstance(v, str) else v)]


def _field_name(value: str) -> str:
    if value.startswith("_"):
        raise ValueError(f"{value!r}: field names starting with '_' are reserved (every record carries _key and _page)")
    return value


FieldName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"), AfterValidator(_field_name)]

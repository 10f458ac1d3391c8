"""What a page yields: ``extract`` (the item selector, the record key) and each field's source and steps."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_serializer, model_validator

from sluice.extraction.structured import StructuredPath
from sluice.spec.selectors import FieldSelector, parse_field_selector
from sluice.spec.values import CssSelector, FieldName, Regex, StrictModel

Step = Literal["strip", "lower", "number", "int", "price", "absolute_url", "collapse_whitespace"]


class RegexStep(StrictModel):
    """Keep the first match of ``regex`` (its first group if it has one), else the field is missing."""

    regex: Regex


class ReplaceStep(StrictModel):
    """Replace every occurrence of ``replace[0]`` by ``replace[1]``."""

    replace: tuple[str, str]


def _step_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value)) if next(iter(value)) in ("regex", "replace") else None
    if isinstance(value, RegexStep | ReplaceStep):
        return "regex" if isinstance(value, RegexStep) else "replace"
    return None


ProcessStep = Annotated[
    Annotated[Step, Tag("name")] | Annotated[RegexStep, Tag("regex")] | Annotated[ReplaceStep, Tag("replace")],
    Discriminator(
        _step_kind,
        custom_error_type="invalid_step",
        custom_error_message="a step is a name (strip, lower, number, int, price, absolute_url, "
        "collapse_whitespace) or a mapping {regex: PATTERN} or {replace: [OLD, NEW]}",
    ),
]


StructuredPathText = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^.\s]+(\.[^.\s]+)*$")]
_STRUCTURED_KEYS = ("structured", "path", "type")


class ExtractField(StrictModel):
    """One named field: a selector (or a structured-data path), its post-processing steps, and whether a record
    needs it."""

    selector: FieldSelector | None = None
    structured: Literal["jsonld", "microdata", "opengraph"] | None = None
    """Read the page's structured data instead of a selector (:mod:`sluice.extraction.structured`)."""
    path: StructuredPathText | None = None
    """Dotted keys into the structured data (``offers.price``; a number indexes an array), or an OpenGraph property."""
    type: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Only JSON-LD nodes or microdata items of this ``@type`` (``Product``, or its IRI)."""
    process: list[ProcessStep] = Field(default_factory=lambda: ["strip"])  # type: ignore[arg-type]
    required: bool = False
    many: bool = False

    @field_validator("selector", mode="before")
    @classmethod
    def _selector(cls, value: Any) -> Any:
        if value is None or isinstance(value, FieldSelector):
            return value
        if isinstance(value, str):
            return parse_field_selector(value)
        raise ValueError("a selector is a string, like 'h1::text' or 'a::attr(href)'")

    @model_validator(mode="after")
    def _one_source(self) -> ExtractField:
        if (self.selector is None) == (self.structured is None):
            raise ValueError("give a selector, or structured (jsonld, microdata, opengraph) with a path: one of them")
        if self.structured is None and (self.path is not None or self.type is not None):
            raise ValueError("path and type go with structured (jsonld, microdata or opengraph)")
        if self.structured is not None and self.path is None:
            raise ValueError(f"structured: {self.structured} needs a path, like 'offers.price' or 'og:title'")
        if self.structured == "opengraph" and self.type is not None:
            raise ValueError("type picks JSON-LD nodes or microdata items: OpenGraph properties have none")
        return self

    def structured_path(self) -> StructuredPath | None:
        """The field's structured source, path and type, ready to read (None for a selector field)."""
        if self.structured is None or self.path is None:
            return None
        return StructuredPath(self.structured, self.path, self.type)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        # A selector field dumps as it did before structured fields existed: spec digests stay as they were.
        dumped = handler(self)
        if isinstance(dumped, dict) and self.structured is None:
            for key in _STRUCTURED_KEYS:
                dumped.pop(key, None)
        return dumped


def _field_shorthand(value: Any) -> Any:
    return {"selector": value} if isinstance(value, str) else value


class Extract(StrictModel):
    """Records: an item selector (None: the page is one item), named fields, and the record key."""

    item: CssSelector | None = None
    pages: Regex | None = None
    fields: dict[FieldName, Annotated[ExtractField, BeforeValidator(_field_shorthand)]] = Field(min_length=1)
    key: list[str] | None = None

    @model_validator(mode="after")
    def _key_fields(self) -> Extract:
        for name in self.key or []:
            if name not in self.fields:
                raise ValueError(f"key names {name!r}, which is not a field (fields: {', '.join(self.fields)})")
        return self

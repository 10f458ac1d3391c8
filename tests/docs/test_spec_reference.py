"""docs/spec.md's key tables against the spec's own model: every key documented, none invented, each default
and each bound the model enforces written in its row, so the reference cannot drift from the code."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sluice.spec import CrawlSpec, SecretRef, parse_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC_DOC = ROOT / "docs" / "spec.md"

NOT_WALKED: frozenset[type[BaseModel]] = frozenset({SecretRef})
"""A reference (``{secret: NAME}``) is documented once, as a value, not under every key that takes one."""
NOT_ROWS = {
    "extract.fields.process.regex": "a step, in the table of steps",
    "extract.fields.process.replace": "a step, in the table of steps",
}
"""Model paths documented in prose or in a table of another shape, not as a key row."""


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def model_fields(model: type[BaseModel] = CrawlSpec, prefix: str = "") -> dict[str, FieldInfo]:
    """Every key a spec may hold, by dotted path (a mapping's own names left out: ``extract.fields.selector``)."""
    found: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        found[path] = field
        for sub in _models(field.annotation):
            if sub not in NOT_WALKED:
                found |= model_fields(sub, path + ".")
    return found


def _section(heading: str) -> str | None:
    if heading.strip("# ") == "Top level":
        return ""
    if heading.strip("# ") == "A field":
        return "extract.fields"
    names = re.findall(r"`([^`]+)`", heading)
    return names[-1] if names else None


def doc_rows() -> dict[str, list[str]]:
    """Each documented key, by dotted path: its row's cells (type, default, meaning)."""
    rows: dict[str, list[str]] = {}
    section: str | None = None
    in_table = False
    for line in SPEC_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            section, in_table = _section(line), False
            continue
        row = line.strip().removeprefix("|").removesuffix("|")
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)] if line.startswith("|") else []
        if cells and cells[0].lower() == "key" and len(cells) == 4:
            in_table = True
            continue
        if not cells:
            in_table = False
        if not in_table or section is None or cells[0].startswith("---"):
            continue
        for key in re.findall(r"`([^`]+)`", cells[0]):
            key = re.sub(r"\.(NAME|RULE)\b", "", key)
            path = key if key.startswith(section + ".") or not section else f"{section}.{key}"
            rows[path] = cells[1:]
    return rows


FIELDS = model_fields()
ROWS = doc_rows()


def _documented(path: str) -> bool:
    """A row of its own, or a row for each of its keys (``politeness.retry.times``...), or a part of a page
    type's ``extract``, which is documented as ``extract`` is."""
    return (
        path in ROWS
        or path in NOT_ROWS
        or any(row.startswith(path + ".") for row in ROWS)
        or path.startswith("types.extract.")
    )


def test_every_key_of_the_model_has_a_row() -> None:
    missing = sorted(p for p in FIELDS if not _documented(p))
    assert missing == [], f"docs/spec.md documents no row for: {missing}"


def test_every_row_is_a_key_of_the_model() -> None:
    invented = sorted(p for p in ROWS if p not in FIELDS and not p.startswith("types"))
    assert invented == [], f"docs/spec.md documents keys the model does not have: {invented}"


def _default(field: FieldInfo) -> Any:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, list):
        return [getattr(v, "value", v) for v in value]
    return value


@pytest.mark.parametrize("path", sorted(p for p in FIELDS if p in ROWS))
def test_a_rows_default_is_the_models(path: str) -> None:
    field, (_type, default, _meaning) = FIELDS[path], ROWS[path]
    literal = re.fullmatch(r"`([^`]*)`(?: \(.*\))?", default)
    if literal is not None:
        assert not field.is_required(), f"{path}: documented default {default}, but the model requires it"
        written = yaml.safe_load(literal.group(1))
        assert written == _default(field), f"{path}: docs say {default}, the model {_default(field)!r}"
    elif default == "none":
        assert field.default is None, f"{path}: docs say none, the model {field.default!r}"
    elif default.startswith("required") and field.default is not PydanticUndefined:
        assert field.default is None, f"{path}: docs say required, the model defaults to {field.default!r}"


def _bounds(field: FieldInfo) -> list[float]:
    found: list[float] = []
    for meta in field.metadata:
        match meta:
            case annotated_types.Ge(ge=n) | annotated_types.Gt(gt=n) | annotated_types.Le(le=n):
                found.append(float(n))  # type: ignore[arg-type]
            case annotated_types.Lt(lt=n) | annotated_types.MaxLen(max_length=n):
                found.append(float(n))  # type: ignore[arg-type]
            case annotated_types.MinLen(min_length=n) if n > 1:
                found.append(float(n))
    return found


def _spelled(number: float) -> list[str]:
    if number == 1 / 24:
        return ["1/24"]
    if number.is_integer():
        return [f"{int(number)}", f"{int(number):,}"]
    return [f"{number:g}"]


@pytest.mark.parametrize("path", sorted(p for p in FIELDS if p in ROWS and _bounds(FIELDS[p])))
def test_a_rows_bounds_are_the_models(path: str) -> None:
    row = " ".join(ROWS[path])
    for bound in _bounds(FIELDS[path]):
        spelled = _spelled(bound)
        assert any(re.search(rf"(?<![\d.,]){re.escape(s)}(?!\d|,\d|\.\d)", row) for s in spelled), (
            f"{path}: the model's bound {spelled[-1]} is not in its row: {row}"
        )


def test_every_spec_the_readme_shows_is_a_valid_spec() -> None:
    """A spec a user copies from the README runs: each YAML block that names a crawl parses as one."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    specs = [yaml.safe_load(block) for block in blocks]
    crawls = [s for s in specs if isinstance(s, dict) and "name" in s and "seeds" in s]
    assert crawls, "the README shows no spec"
    for data in crawls:
        parse_spec(data)

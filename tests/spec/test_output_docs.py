"""docs/spec.md documents every key of the ``output`` section, with an example that the spec model takes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from sluice.spec import parse_spec
from sluice.spec.models import Output

SPEC_DOC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def _section(title: str) -> str:
    text = SPEC_DOC.read_text(encoding="utf-8")
    start = text.index(f"## `{title}`")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_output_key_has_a_row_and_the_example_parses() -> None:
    section = _section("output")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))
    assert rows == set(Output.model_fields)
    (example,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    output = yaml.safe_load(example)["output"]
    base = {"name": "documented", "seeds": ["https://example.com/"], "extract": {"fields": {"title": "h1"}}}
    spec = parse_spec(base | {"output": output})
    assert spec.output.archive is True
    assert parse_spec(base).output.archive is False
    assert spec.digest() == parse_spec(base).digest()  # keeping responses changes no record: the digest stays

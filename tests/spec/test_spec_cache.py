"""A spec file is parsed once a process for the same bytes: a changed file is parsed anew, a bad one fails each time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sluice.spec import SpecError, load, load_spec


def _spec(name: str, seed: str) -> dict[str, Any]:
    return {"name": name, "seeds": [seed], "extract": {"fields": {"title": "h1::text"}}}


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources :func:`load.parse_spec` validated, in order."""
    seen: list[str] = []
    parse = load.parse_spec

    def counted(data: Any, source: str = "<spec>", **kwargs: Any) -> Any:
        seen.append(source)
        return parse(data, source, **kwargs)

    monkeypatch.setattr(load, "parse_spec", counted)
    return seen


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_the_same_bytes_are_parsed_once_and_a_changed_file_again(
    tmp_path: Path, parses: list[str], suffix: str
) -> None:
    path = tmp_path / f"cached{suffix}"
    path.write_text(json.dumps(_spec("cached", "https://a.example/1")), encoding="utf-8")
    first = load_spec(path, named_after_file=True)
    again = load_spec(path)
    assert again is first
    assert parses == [str(path)]

    path.write_text(json.dumps(_spec("cached", "https://a.example/2")), encoding="utf-8")
    changed = load_spec(path, named_after_file=True)
    assert changed.seeds.urls == ["https://a.example/2"]
    assert parses == [str(path), str(path)]

    path.write_text(json.dumps(_spec("cached", "https://a.example/1")), encoding="utf-8")
    assert load_spec(path).seeds.urls == ["https://a.example/1"]


def test_a_cached_spec_is_still_checked_against_its_file_name(tmp_path: Path, parses: list[str]) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(_spec("books", "https://a.example/1")), encoding="utf-8")
    assert load_spec(path).name == "books"
    with pytest.raises(SpecError, match="must match the file name"):
        load_spec(path, named_after_file=True)
    assert len(parses) == 1


def test_a_spec_that_fails_fails_each_time(tmp_path: Path, parses: list[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**_spec("bad", "https://a.example/1"), "lots": 1}), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(SpecError, match="lots: unknown key"):
            load_spec(path)
    assert len(parses) == 2

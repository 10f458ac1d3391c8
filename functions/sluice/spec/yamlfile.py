"""A YAML spec file read into data: its depth checked before it is built, each key given twice noted.

Its own module so that PyYAML is imported only when a YAML file is read (``load.load_spec``): a JSON
spec, the one the deployed functions can be given, never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sluice.spec.load import MAX_SPEC_DEPTH, too_deep
from sluice.spec.values import SpecError


def read_yaml(path: Path, text: str) -> tuple[Any, list[str]]:
    """The document and a line for each duplicate key, or a :class:`SpecError` naming where it is not YAML."""
    try:
        _check_yaml_depth(path, text)
        return _load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        raise SpecError(str(path), [f"(file): not valid YAML: {where}{getattr(exc, 'problem', exc)}"]) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML that notes each key given twice in one mapping (PyYAML would keep the last silently).

    Noted, not raised: the document is still built and validated, so the duplicate is reported beside
    every other error instead of hiding them.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen and len(self.duplicates) < MAX_DUPLICATES_LISTED:
                mark = key_node.start_mark
                self.duplicates.append(
                    f"(file): line {mark.line + 1} column {mark.column + 1}: key {key!r} appears twice in one mapping"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


MAX_DUPLICATES_LISTED = 20
"""Duplicate keys named at most (a generated file may repeat a key thousands of times)."""


def _load_yaml(text: str) -> tuple[Any, list[str]]:
    """The document, and a line for each key given twice."""
    loader = _UniqueKeyLoader(text)
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()


def _check_yaml_depth(path: Path, text: str) -> None:
    """Refuse a YAML document nested deeper than :data:`MAX_SPEC_DEPTH`, from its event stream (the parser is a
    loop, not a recursion: only building the document recurses)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                mark = event.start_mark
                raise too_deep(path, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            depth -= 1

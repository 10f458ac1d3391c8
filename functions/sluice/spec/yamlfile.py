"""A YAML spec file read into data: its depth checked before it is built, each key given twice noted.

Its own module so that PyYAML is imported only when a YAML file is read (``load.load_spec``): a JSON
spec, the one the deployed functions can be given, never loads it.

Read with libyaml's parser (``CSafeLoader``) where PyYAML was built with it: a 1,200-seed spec took 0.30 s
to parse in Python and 0.03 s in C, paid by every ``sluice run`` and ``sluice validate``. The constructor
and the resolver are PyYAML's own either way (the same data, the same duplicate keys). A document the C
parser refuses, or refuses as too deep, is read again with the Python one, whose messages are the ones
reported: an error names the same line, column and problem whichever parser the machine has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from sluice.spec.load import MAX_SPEC_DEPTH, too_deep
from sluice.spec.values import SpecError


def read_yaml(path: Path, text: str, *, fast: bool = True) -> tuple[Any, list[str]]:
    """The document and a line for each duplicate key, or a :class:`SpecError` naming where it is not YAML.

    ``fast``: with libyaml when PyYAML has it (``False``: PyYAML's Python parser, as a machine without it)."""
    if fast and _CLoader is not None:
        try:
            _check_yaml_depth(path, text, _CSafeLoader)
            return _load_yaml(text, _CLoader)
        except (yaml.YAMLError, SpecError):
            pass  # read again below: the Python parser's error is the one reported
    try:
        _check_yaml_depth(path, text, yaml.SafeLoader)
        return _load_yaml(text, _UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        raise SpecError(str(path), [f"(file): not valid YAML: {where}{getattr(exc, 'problem', exc)}"]) from None


class _UniqueKeys(SafeConstructor):
    """A constructor that notes each key given twice in one mapping (PyYAML would keep the last silently).

    Noted, not raised: the document is still built and validated, so the duplicate is reported beside
    every other error instead of hiding them.
    """

    duplicates: list[str]

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


class _UniqueKeyLoader(yaml.SafeLoader, _UniqueKeys):
    """PyYAML's Python parser, noting duplicate keys."""


_CLoader: type[_UniqueKeys] | None = None
"""libyaml's parser noting duplicate keys, or None where PyYAML was built without libyaml."""
_CSafeLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
if hasattr(yaml, "CSafeLoader"):

    class _CUniqueKeyLoader(yaml.CSafeLoader, _UniqueKeys):
        """libyaml's parser, noting duplicate keys."""

    _CLoader = _CUniqueKeyLoader

MAX_DUPLICATES_LISTED = 20
"""Duplicate keys named at most (a generated file may repeat a key thousands of times)."""


def _load_yaml(text: str, loader_type: type[_UniqueKeys]) -> tuple[Any, list[str]]:
    """The document, and a line for each key given twice."""
    loader: Any = loader_type(text)  # type: ignore[call-arg]  # the parser's own __init__ takes the text
    loader.duplicates = []
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()


def _check_yaml_depth(path: Path, text: str, loader: type[Any]) -> None:
    """Refuse a YAML document nested deeper than :data:`MAX_SPEC_DEPTH`, from its event stream (the parser is a
    loop, not a recursion: only building the document recurses)."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                mark = event.start_mark
                raise too_deep(path, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            depth -= 1

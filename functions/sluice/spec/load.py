"""Reading a spec file: YAML or JSON in; a validated CrawlSpec, or a SpecError naming each bad field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sluice.spec.models import CrawlSpec, SpecError


def _describe(error: Any) -> str:
    path = ".".join(str(p) for p in error["loc"]) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{path}: unknown key"
    if kind == "missing":
        return f"{path}: required"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind == "literal_error":
        message = f"{error.get('input')!r} is not one of: " + message.removeprefix("Input should be ")
        if "process" in error["loc"]:
            message += ", nor a mapping {regex: PATTERN} or {replace: [OLD, NEW]}"
    return f"{path}: {message}"


_TAGS = frozenset({"name", "regex", "replace", "function-after[_field_shorthand(), ExtractField]"})


def _without_tags(error: Any) -> Any:
    """Drop the union tags pydantic puts in an error's path: the user never wrote them."""
    loc = list(error["loc"])
    if "process" in loc and len(loc) > loc.index("process") + 2 and loc[loc.index("process") + 2] in _TAGS:
        del loc[loc.index("process") + 2]
    return {**error, "loc": tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))}


def parse_spec(data: Any, source: str = "<spec>") -> CrawlSpec:
    """Validate already-loaded data as a crawl spec."""
    if data is None:
        raise SpecError(source, ["(top level): the spec is empty"])
    if not isinstance(data, dict):
        raise SpecError(source, [f"(top level): a spec is a mapping, not {type(data).__name__}"])
    try:
        return CrawlSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, [_describe(_without_tags(e)) for e in exc.errors()]) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (PyYAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice in one mapping", mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


SPEC_SUFFIXES = (".yaml", ".yml", ".json")
"""What a spec file's name ends in; a crawl's spec is ``NAME`` plus the first of these that exists."""


def spec_files(folder: Path) -> list[Path]:
    """The spec files in ``folder``, sorted by name (none if the folder does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())


def find_spec(folder: Path, crawl: str) -> Path | None:
    """The spec file of ``crawl`` in ``folder``: ``crawl.yaml``, ``crawl.yml`` or ``crawl.json``, in that order."""
    for suffix in SPEC_SUFFIXES:
        path = folder / f"{crawl}{suffix}"
        if path.is_file():
            return path
    return None


MAX_SPEC_BYTES = 1024 * 1024
"""A spec file's size at most: validating costs time and memory with size, and a spec is read at every cold start."""
MAX_SPEC_DEPTH = 32
"""Nested mappings and lists a spec document may hold, at most, counted before it is built: the deepest a spec
has any use for is about 8 (``types.NAME.extract.fields.FIELD.process[0].regex``), and a document nested
200,000 deep (400 KB) would otherwise end the loader, the parser or the validator in a RecursionError."""
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
"""A JSON string (skipped whole: brackets inside it are text) or a bracket."""


def _too_deep(path: Path, line: int, column: int) -> SpecError:
    return SpecError(
        str(path),
        [
            f"(file): nested more than {MAX_SPEC_DEPTH} levels deep at line {line} column {column}: "
            "a spec is a few levels of mappings and lists"
        ],
    )


def _check_yaml_depth(path: Path, text: str) -> None:
    """Refuse a YAML document nested deeper than :data:`MAX_SPEC_DEPTH`, from its event stream (the parser is a
    loop, not a recursion: only building the document recurses)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                mark = event.start_mark
                raise _too_deep(path, mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            depth -= 1


def _check_json_depth(path: Path, text: str) -> None:
    """Refuse a JSON document nested deeper than :data:`MAX_SPEC_DEPTH`, counting its brackets outside strings."""
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        kind = token.group()
        if kind in "[{":
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise _too_deep(path, line, token.start() - (text.rfind("\n", 0, token.start()) + 1) + 1)
        elif kind in "]}":
            depth -= 1


def load_spec(path: str | Path, *, named_after_file: bool = False) -> CrawlSpec:
    """Read and validate a spec file (``.yaml``, ``.yml`` or ``.json``).

    With ``named_after_file``, the crawl's name must be the file's name: the deployed scheduler
    finds a crawl's spec by its name, so ``crawls/books.yaml`` must say ``name: books``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError(
                str(path),
                [
                    f"(file): {size:,} bytes is more than the {MAX_SPEC_BYTES:,} a spec may have; "
                    "put long seed lists in a seed file (seeds.file), one URL per line"
                ],
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [f"(file): cannot read: {exc}"]) from None
    try:
        if path.suffix == ".json":
            _check_json_depth(path, text)
            data = json.loads(text)
        else:
            _check_yaml_depth(path, text)
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506
    except json.JSONDecodeError as exc:
        raise SpecError(
            str(path), [f"(file): not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        raise SpecError(str(path), [f"(file): not valid YAML: {where}{getattr(exc, 'problem', exc)}"]) from None
    spec = parse_spec(data, str(path))
    if named_after_file:
        problems = []
        if path.suffix not in SPEC_SUFFIXES:
            problems.append(f"(file): a spec file ends in {', '.join(SPEC_SUFFIXES)}, not {path.suffix or 'nothing'}")
        if path.stem != spec.name:
            problems.append(
                f"name: {spec.name!r} must match the file name {path.stem!r} (the scheduler finds a crawl by its file)"
            )
        if problems:
            raise SpecError(str(path), problems)
    return spec

"""Reading a spec file: YAML or JSON in; a validated CrawlSpec, or a SpecError naming each bad field."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sluice.spec.crawl import CrawlSpec
from sluice.spec.values import SpecError


def _describe(error: Any) -> list[str]:
    """The lines of one validation error: a validator that found several problems gives a line each."""
    path = ".".join(str(p) for p in error["loc"]) or "(top level)"
    return [f"{path}: {line}" for line in _message(error).split("\n")]


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind == "literal_error":
        message = f"{error.get('input')!r} is not one of: " + message.removeprefix("Input should be ")
        if "process" in error["loc"]:
            message += ", nor a mapping {regex: PATTERN} or {replace: [OLD, NEW]}"
    elif kind not in _OWN_WORDS:
        message += _what_was_given(error.get("input"))
    return message


_OWN_WORDS = frozenset({"value_error", "assertion_error"})
"""Errors our validators raise: their messages already quote what they refuse."""


def _what_was_given(value: Any) -> str:
    """`` (got 'lots')``: pydantic's own messages ("Input should be a valid integer") do not say what the spec
    held, and a spec's wrong value is easier found by its text. Only a short scalar is quoted."""
    if isinstance(value, bool | int | float | str) and len(shown := repr(value)) <= 80:
        return f" (got {shown})"
    return ""


_TAGS = frozenset({"name", "regex", "replace", "function-after[_field_shorthand(), ExtractField]"})


def _without_tags(error: Any) -> Any:
    """Drop the union tags pydantic puts in an error's path: the user never wrote them."""
    loc = list(error["loc"])
    if "process" in loc and len(loc) > loc.index("process") + 2 and loc[loc.index("process") + 2] in _TAGS:
        del loc[loc.index("process") + 2]
    return {**error, "loc": tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))}


def parse_spec(data: Any, source: str = "<spec>", *, also: Sequence[str] = ()) -> CrawlSpec:
    """Validate already-loaded data as a crawl spec; ``also``: errors found while reading it (reported with
    the validation's own, so one problem in the file does not hide the others)."""
    if data is None:
        raise SpecError(source, [*also, "(top level): the spec is empty"])
    if not isinstance(data, dict):
        raise SpecError(source, [*also, f"(top level): a spec is a mapping, not {type(data).__name__}"])
    try:
        spec = CrawlSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            source, [*also, *(line for e in exc.errors() for line in _describe(_without_tags(e)))]
        ) from None
    if also:
        raise SpecError(source, list(also))
    return spec


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


def too_deep(path: Path, line: int, column: int) -> SpecError:
    return SpecError(
        str(path),
        [
            f"(file): nested more than {MAX_SPEC_DEPTH} levels deep at line {line} column {column}: "
            "a spec is a few levels of mappings and lists"
        ],
    )


def _check_json_depth(path: Path, text: str) -> None:
    """Refuse a JSON document nested deeper than :data:`MAX_SPEC_DEPTH`, counting its brackets outside strings."""
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        kind = token.group()
        if kind in "[{":
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise too_deep(path, line, token.start() - (text.rfind("\n", 0, token.start()) + 1) + 1)
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
        spec = _parsed(path, text)
    except SpecError as exc:
        if not named_after_file:
            raise
        also = _file_problems(path, _raw_name(path, text))  # said with the rest: one `validate` names them all
        raise SpecError(exc.source, exc.errors + [p for p in also if p not in exc.errors]) from None
    if named_after_file and (problems := _file_problems(path, spec.name)):
        raise SpecError(str(path), problems)
    return spec


def _file_problems(path: Path, name: object) -> list[str]:
    """What is wrong with a spec file's own name: its suffix, and ``name`` (the crawl's) not matching it."""
    problems = []
    if path.suffix not in SPEC_SUFFIXES:
        problems.append(f"(file): a spec file ends in {', '.join(SPEC_SUFFIXES)}, not {path.suffix or 'nothing'}")
    if isinstance(name, str) and path.stem != name:
        problems.append(
            f"name: {name!r} must match the file name {path.stem!r} (the scheduler finds a crawl by its file)"
        )
    return problems


def _raw_name(path: Path, text: str) -> object:
    """The ``name`` a spec that failed to parse says, if its file reads as a mapping (None if not)."""
    try:
        data = _data(path, text)[0]
    except (SpecError, ValueError):
        return None
    return data.get("name") if isinstance(data, dict) else None


@lru_cache(maxsize=8)
def _parsed(path: Path, text: str) -> CrawlSpec:
    """The spec a file at ``path`` holding ``text`` says, parsed and validated once a process for those bytes.

    Keyed by the file's whole text (and its path, which names it in errors and says JSON or YAML): the same
    bytes are the same spec, and a file that changed is parsed anew. ``sluice run`` reads a crawl's spec in
    the command and again when its run starts; a spec that fails is not kept (its error is raised each time)."""
    data, duplicates = _data(path, text)
    return parse_spec(data, str(path), also=duplicates)


def _data(path: Path, text: str) -> tuple[Any, list[str]]:
    """A spec file's text read as JSON or YAML (by its suffix), and the keys YAML found twice."""
    try:
        if path.suffix == ".json":
            _check_json_depth(path, text)
            return json.loads(text), []
        # PyYAML is loaded for a YAML file only: the deployed fetcher reading a JSON spec never pays for it.
        from sluice.spec.yamlfile import read_yaml

        return read_yaml(path, text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            str(path), [f"(file): not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"]
        ) from None

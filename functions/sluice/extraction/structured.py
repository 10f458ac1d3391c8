"""Structured data a page carries for machines: JSON-LD, microdata and OpenGraph, read as field values.

A small reader on selectolax and :mod:`json`, not extruct: extruct and its dependencies (lxml,
rdflib, html5lib, ...) are 27 MB installed, and the layer is at 28.2 of its 30 MB (docs/spec.md
says what this reader does not cover). A page's structured data is read at most once per page,
and only by a spec with a structured field.

Every bad input has a defined result and stays inside its field: a JSON-LD block that is not JSON,
too large or nested too deep is left out with its reason (the other blocks still count), so a field
whose value only that block held is missing; no page and no other field fails for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from selectolax.lexbor import LexborHTMLParser, LexborNode

Source = Literal["jsonld", "microdata", "opengraph"]
MAX_BLOCKS = 32
"""JSON-LD blocks read per page; later ones are left out (a page rarely has more than five)."""
MAX_BLOCK_BYTES = 1024 * 1024
"""Characters of one JSON-LD block; a larger one is left out unread."""
MAX_ITEMS = 1_000
"""Microdata items read per root."""
_WRAPPERS = re.compile(r"^\s*(?:<!--|//\s*<!\[CDATA\[|<!\[CDATA\[)|(?://\s*\]\]>|\]\]>|-->)\s*$")
_SRC = frozenset({"audio", "embed", "iframe", "img", "source", "track", "video"})
_HREF = frozenset({"a", "area", "link"})


@dataclass(frozen=True, slots=True)
class Block:
    """One ``<script type="application/ld+json">``: its data, or why it was left out."""

    index: int
    data: Any = None
    error: str | None = None


def _parse_block(index: int, text: str) -> Block:
    if len(text) > MAX_BLOCK_BYTES:
        return Block(index, error=f"block {index}: {len(text):,} characters, over the {MAX_BLOCK_BYTES:,} read")
    text = _WRAPPERS.sub("", text).strip()
    if not text:
        return Block(index, error=f"block {index}: empty")
    try:
        # strict=False: control characters (raw newlines, tabs) inside strings, which pages often have.
        return Block(index, json.loads(text, strict=False))
    except json.JSONDecodeError as exc:
        return Block(index, error=f"block {index}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})")
    except RecursionError:
        return Block(index, error=f"block {index}: nested too deep to read")


def jsonld_blocks(tree: LexborHTMLParser) -> list[Block]:
    """The page's JSON-LD blocks in document order, at most :data:`MAX_BLOCKS`."""
    blocks = []
    for index, node in enumerate(tree.css('script[type="application/ld+json" i]')):
        if index >= MAX_BLOCKS:
            break
        blocks.append(_parse_block(index, node.text(deep=True) or ""))
    return blocks


def _nodes(data: Any) -> Iterator[Any]:
    """The top-level JSON-LD nodes of a block: itself, each element of an array, each entry of ``@graph``."""
    if isinstance(data, list):
        for element in data:
            yield from _nodes(element)
    elif isinstance(data, dict):
        yield data
        graph = data.get("@graph")
        if graph is not None:
            yield from _nodes(graph)


def _type_names(value: Any) -> list[str]:
    names = value if isinstance(value, list) else [value]
    return [str(n) for n in names if isinstance(n, str)]


def has_type(node: Any, wanted: str) -> bool:
    """``node``'s ``@type`` names ``wanted``, bare or as a vocabulary IRI (``https://schema.org/Product``)."""
    if not isinstance(node, dict):
        return False
    for name in _type_names(node.get("@type")):
        if name == wanted or name.rsplit("/", 1)[-1].rsplit("#", 1)[-1].rsplit(":", 1)[-1] == wanted:
            return True
    return False


def _walk(value: Any, keys: tuple[str, ...]) -> Iterator[Any]:
    """Every value at ``keys`` below ``value``: an array met on the way is walked element by element."""
    if isinstance(value, list):
        if keys and keys[0].isdigit():
            index = int(keys[0])
            if index < len(value):
                yield from _walk(value[index], keys[1:])
            return
        for element in value:
            yield from _walk(element, keys)
        return
    if not keys:
        yield value
        return
    if isinstance(value, dict) and keys[0] in value:
        yield from _walk(value[keys[0]], keys[1:])


def field_value(value: Any) -> Any:
    """What a field takes from a value found at its path: a scalar as it is (a boolean as ``true``/``false``), an
    object's ``@value`` if it has one, any other object or array as compact JSON text, None for JSON null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and "@value" in value:
        return field_value(value["@value"])
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return value


def values_at(nodes: Iterable[Any], path: tuple[str, ...], type_: str | None) -> list[Any]:
    """The values at ``path`` in each node (of ``@type`` ``type_`` when given), in document order, nulls left out."""
    found: list[Any] = []
    for node in nodes:
        if type_ is not None and not has_type(node, type_):
            continue
        found.extend(v for v in (field_value(raw) for raw in _walk(node, path)) if v is not None)
    return found


def opengraph(tree: LexborHTMLParser) -> dict[str, list[str]]:
    """Each ``<meta property="og:...">`` (or ``product:``, ``article:``, ...) content, by property, in order.

    A ``name`` attribute stands for ``property`` when it has a prefix (some sites write ``name="og:title"``)."""
    found: dict[str, list[str]] = {}
    for meta in tree.css("meta[content]"):
        prop = meta.attrs.get("property") or meta.attrs.get("name") or ""
        content = meta.attrs.get("content")
        if ":" in prop and content is not None:
            found.setdefault(prop.strip().lower(), []).append(content)
    return found


def _prop_value(node: LexborNode) -> str:
    tag, attrs = node.tag, node.attrs
    attr = "content" if tag == "meta" or "content" in attrs else None
    attr = attr or ("src" if tag in _SRC else "href" if tag in _HREF else "data" if tag == "object" else None)
    attr = attr or ("value" if tag in ("data", "meter") else "datetime" if tag == "time" else None)
    value = attrs.get(attr) if attr is not None else None
    return value if value is not None else (node.text(deep=True) or "").strip()


def _scope_of(node: LexborNode, stop: LexborNode) -> LexborNode | None:
    """The nearest ``itemscope`` element above ``node``, up to ``stop`` (None when none is found before it)."""
    current = node.parent
    while current is not None:
        if "itemscope" in current.attrs:
            return current
        if current.mem_id == stop.mem_id:
            return None
        current = current.parent
    return None


def _item(scope: LexborNode, depth: int = 0) -> dict[str, Any]:
    """One microdata item as a JSON-LD-like object: ``@type`` from ``itemtype``, one key per ``itemprop``."""
    item: dict[str, Any] = {}
    types = (scope.attrs.get("itemtype") or "").split()
    if types:
        item["@type"] = types[0] if len(types) == 1 else types
    for node in scope.css("[itemprop]"):
        owner = _scope_of(node, scope)
        if owner is None or owner.mem_id != scope.mem_id:
            continue  # a property of an item nested further down
        is_item = "itemscope" in node.attrs
        value: Any = _item(node, depth + 1) if is_item and depth < 16 else _prop_value(node)
        for name in (node.attrs.get("itemprop") or "").split():
            item.setdefault(name, []).append(value)
    return {k: (v[0] if isinstance(v, list) and len(v) == 1 and k != "@type" else v) for k, v in item.items()}


def microdata(root: LexborNode) -> list[dict[str, Any]]:
    """The microdata items of ``root`` (the root itself if it is one, else the outermost items inside it)."""
    if "itemscope" in root.attrs:
        return [_item(root)]
    items = []
    for node in root.css("[itemscope]"):
        if _scope_of(node, root) is None and "itemprop" not in node.attrs:
            items.append(_item(node))
            if len(items) >= MAX_ITEMS:
                break
    return items


class PageData:
    """One page's structured data, each kind read the first time a field asks for it."""

    __slots__ = ("_blocks", "_og", "_tree")

    def __init__(self, tree: LexborHTMLParser) -> None:
        self._tree = tree
        self._blocks: list[Block] | None = None
        self._og: dict[str, list[str]] | None = None

    @property
    def blocks(self) -> list[Block]:
        if self._blocks is None:
            self._blocks = jsonld_blocks(self._tree)
        return self._blocks

    @property
    def opengraph(self) -> dict[str, list[str]]:
        if self._og is None:
            self._og = opengraph(self._tree)
        return self._og


@dataclass(frozen=True, slots=True)
class StructuredPath:
    """A field's structured source, path and type, compiled: :meth:`values` reads them off a page or an item."""

    source: Source
    path: str
    type: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))

    def values(self, page: PageData, item: LexborNode | None) -> list[Any]:
        """Every value the path gives, in document order: JSON-LD and OpenGraph from the whole page, microdata
        from the item (the document when the spec has no ``item``)."""
        if self.source == "opengraph":
            return list(page.opengraph.get(self.path.lower(), []))
        if self.source == "jsonld":
            nodes = (n for block in page.blocks if block.error is None for n in _nodes(block.data))
            return values_at(nodes, self.keys, self.type)
        return values_at(microdata(item), self.keys, self.type) if item is not None else []

    def problems(self, page: PageData) -> list[str]:
        """Why blocks the path could read were left out (JSON-LD only): what `sluice parse` shows."""
        return [b.error for b in page.blocks if b.error is not None] if self.source == "jsonld" else []

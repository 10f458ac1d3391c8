"""Page extraction: parse once with lexbor, turn items into records and follow links into URLs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from sluice.domain.pages import MAX_URL
from sluice.extraction.limits import charge, check_nesting, page_budget
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.processing import FieldProcessor, StepFn
from sluice.extraction.structured import PageData, StructuredPath
from sluice.extraction.urls import LinkJudge, Scope, canonicalize_url, resolve_link
from sluice.jsontext import json_text
from sluice.spec import CrawlSpec, Extract, ExtractField
from sluice.spec.selectors import FieldSelector

Getter = Callable[[LexborNode], "str | None"]
_LINK_TAGS = frozenset({"a", "area", "link"})
_CACHE_SIZE = 64
# From this many items on, field selectors run once per page instead of once per item.
_PAGE_WIDE_MIN_ITEMS = 10
_PAGE_WIDE_MAX_TAGS = 100
"""Tags per item above which a page's items are queried one by one (see ``_first_matches``)."""
_CHECK_EVERY = 16
"""Items extracted between two looks at the page's time budget."""


# ``json.dumps`` with options builds an encoder per call (~10 µs of a record's ~15); these are built once,
# and write exactly what ``json.dumps`` with the same options writes. The canonical one keeps its C encoder too
# (a ``JSONEncoder``'s ``encode`` builds one per call: 1.2 of a record's 5 µs).
_CANONICAL_JSON = json_text(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
_LINE_JSON = json_text(ensure_ascii=False)


def content_hash(data: Mapping[str, Any]) -> str:
    """sha256 of ``data`` as canonical JSON (sorted keys, UTF-8), hex, first 32 characters.

    Stored with every record and compared across runs (new, changed, unchanged): its value never changes.
    """
    canonical = _CANONICAL_JSON(data)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Record:
    """One extracted item: its key, its field values (None when missing) and where it was found."""

    key: str
    data: dict[str, Any]
    page_url: str
    position: int
    key_fallback: bool = False
    """The key is not what ``extract.key`` names (a key field was missing): the url field's value, or the
    page URL and position (without ``extract.key``, only the latter counts as a fallback)."""
    type: str | None = None
    """The page type of a spec with ``types`` (None for a one-type spec)."""
    _content_hash: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @property
    def identity(self) -> str:
        """What makes a record one in a run: its key, within its type (keys are per type)."""
        return record_identity(self.key, self.type)

    @property
    def content_hash(self) -> str:
        """The hash of ``data`` that tells new, changed and unchanged records apart.

        Worked out once a record: a page's visit packs it, classifies with it and its writer stores it.
        ``data`` is never changed in place (a record with other fields is a new one, ``dataclasses.replace``).
        """
        found = self._content_hash
        if found is None:
            found = content_hash(self.data)
            object.__setattr__(self, "_content_hash", found)
        return found


def record_identity(key: str, type_: str | None) -> str:
    """A record's key within its type: the key itself for a one-type spec (its digests stay as they were)."""
    return key if type_ is None else f"{type_}\x1f{key}"


def record_line(record: Record) -> str:
    """One record as one JSON line: its fields, plus ``_key``, ``_page`` (and ``_type``) for provenance."""
    payload: dict[str, Any] = {"_key": record.key, "_page": record.page_url}
    if record.type is not None:
        payload["_type"] = record.type
    payload |= record.data
    return _LINE_JSON(payload) + "\n"


@dataclass(frozen=True, slots=True)
class PageExtraction:
    """What one page yielded: records, in-scope links and the counts a run's health is judged by.

    ``rejected`` counts, per required field, the items dropped for lacking it (an item lacking two
    counts under both; ``items - len(records)`` is the number dropped). ``missing`` counts, per
    field, the items where it was missing. ``out_of_scope`` counts distinct links left out.
    """

    records: list[Record]
    links: list[str]
    out_of_scope: int
    items: int
    rejected: dict[str, int]
    missing: dict[str, int]
    base_url: str
    type: str | None = None
    """The page's type (a spec with ``types``); None for a one-type spec or a page no type takes."""
    rules: dict[str, str] | None = None
    """The follow rule that found each link a type's rule found (a link of ``follow.selectors`` has none)."""
    owners: dict[str, int] | None = None
    """For a link a type's rule found inside an item, the item's position: whose fields the link carries."""
    links_dropped: int = 0
    """In-scope links longer than a run visits (:data:`~sluice.domain.pages.MAX_URL`): left out of ``links`` and
    counted, the one rule for the pipeline and ``sluice crawl`` alike."""

    @property
    def fallback_keys(self) -> int:
        """Records whose key fell back (see :attr:`Record.key_fallback`)."""
        return sum(r.key_fallback for r in self.records)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    css: str | None
    get: Getter
    pipeline: StepFn
    required: bool
    many: bool
    page_url: bool = False
    single: bool = False
    """Neither a list nor the page URL: one node's value."""
    structured: StructuredPath | None = None


def _own_text(node: LexborNode) -> str | None:
    return node.text(deep=False)


def _deep_text(node: LexborNode) -> str | None:
    return node.text(deep=True)


def _outer_html(node: LexborNode) -> str | None:
    return node.html


def _attribute(name: str) -> Getter:
    lower = name.lower()

    def get(node: LexborNode) -> str | None:
        value = node.attrs.get(name)
        return node.attrs.get(lower) if value is None and lower != name else value

    return get


def _getter(selector: FieldSelector) -> Getter:
    if selector.pick == "attr" and selector.attr is not None:
        return _attribute(selector.attr)
    return {"text": _own_text, "html": _outer_html}.get(selector.pick, _deep_text)


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != []


def _key_part(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class Extractor:
    """A spec compiled for extraction: selectors, steps, regexes and scope prepared once."""

    __slots__ = (
        "_fields",
        "_follow",
        "_item",
        "_judge",
        "_key",
        "_kind",
        "_nested_css",
        "_no_records",
        "_pages",
        "_plan",
        "_scope",
        "_singles",
        "_structured",
    )

    def __init__(self, spec: CrawlSpec, kind: str | None = None) -> None:
        """The extractor of one page type of ``spec`` (``kind`` None: a one-type spec, or a page no type takes)."""
        self._kind = kind
        extract = spec.extracts().get(kind)
        self._no_records = extract is None
        if extract is None:  # a typed spec's page that no type takes: its links only
            extract = Extract(fields={"url": "::page_url"})
        self._item = extract.item
        self._nested_css = _nesting_selector(extract.item) if extract.item is not None else None
        self._pages = compile_pattern(extract.pages) if extract.pages is not None else None
        self._key = tuple(extract.key or ())
        self._fields = tuple(_compile_field(name, f) for name, f in extract.fields.items())
        self._structured = any(f.structured is not None for f in self._fields)
        # The common spec, every field one node's value: the item loop runs this plan without a call per item.
        self._plan = (
            tuple((f.name, f.css, f.get, f.pipeline, f.required) for f in self._fields)
            if all(f.single and f.structured is None for f in self._fields)
            else None
        )
        # Distinct single-element selectors: fields sharing one ("h3 a") run it once per item.
        self._singles = tuple(
            dict.fromkeys(f.css for f in self._fields if not f.many and not f.page_url and f.css is not None)
        )
        rules = spec.types[kind].follow if spec.types is not None and kind is not None else {}
        # A type's rules first: a link one of them finds too is that rule's (it decides the linked page's type).
        self._follow: tuple[tuple[str, str | None], ...] = (
            *((css, name) for name, rule in rules.items() for css in rule.selectors),
            *((css, None) for css in spec.follow.selectors),
        )
        self._scope = Scope.from_spec(spec)
        self._judge = LinkJudge(self._scope)

    def extract(self, page_url: str, html: str | bytes) -> PageExtraction:
        """Extract records and links from one page; broken or empty HTML yields what it can.

        ``html`` is text, or bytes lexbor reads as UTF-8 (see :func:`sluice.extraction.charset.parser_input`).
        Raises :class:`~sluice.extraction.limits.PageTooComplex` for a page nested too deep to parse,
        or whose extraction would pass its time budget (:data:`~sluice.extraction.limits.EXTRACTION_S`).
        """
        if _heap_pending:
            _tune_heap()
        tags = check_nesting(html)
        with page_budget():
            tree = LexborHTMLParser(html)
            return self._extract(page_url, tree, tags)

    def _extract(self, page_url: str, tree: LexborHTMLParser, tags: int = 0) -> PageExtraction:
        base_url = _base_url(tree, page_url)
        rejected = {f.name: 0 for f in self._fields if f.required}
        missing = {f.name: 0 for f in self._fields}
        if self._no_records or (self._pages is not None and self._pages.search(page_url) is None):
            links, out_of_scope, rules, _, too_long = self._links(tree, base_url, page_url, [])
            return PageExtraction(
                [], links, out_of_scope, 0, rejected, missing, base_url, self._kind, rules or None, None, too_long
            )
        items = self._items(tree)
        links, out_of_scope, rules, owners, too_long = self._links(tree, base_url, page_url, items)
        structured = PageData(tree) if self._structured else None  # read once a page, when a field asks
        records: list[Record] = []
        page_key = ""
        plan = self._plan
        for position, (item, found) in enumerate(zip(items, self._first_matches(tree, items, tags), strict=True)):
            if not position % _CHECK_EVERY:
                charge(0.0, f"{position:,} of {len(items):,} items extracted")
            keep = True
            if plan is not None:  # every field one node's value: _fields_of's first case, inlined
                data: dict[str, Any] = {}
                for name, css, get, run, required in plan:
                    node = found[css] if css is not None else item
                    value: Any = None
                    if node is not None:
                        raw = get(node)
                        if raw is not None:
                            value = run(raw, base_url)
                            if value == "":
                                value = None
                    data[name] = value
                    if value is None:  # a single field's steps give text, a number or None: never a list
                        missing[name] += 1
                        if required:
                            rejected[name] += 1
                            keep = False
            else:
                data = self._fields_of(item, found, base_url, page_url, structured)
                for field in self._fields:
                    if not _present(data[field.name]):
                        missing[field.name] += 1
                        if field.required:
                            rejected[field.name] += 1
                            keep = False
            if not keep:
                continue
            key, fallback = self._record_key(data)
            if key is None:
                page_key = page_key or _page_key(page_url)
                key, fallback = f"{page_key}#{position}", True
            records.append(Record(key, data, page_url, position, fallback, self._kind))
        return PageExtraction(
            records,
            links,
            out_of_scope,
            len(items),
            rejected,
            missing,
            base_url,
            self._kind,
            rules or None,
            owners,
            too_long,
        )

    def _items(self, tree: LexborHTMLParser) -> list[LexborNode]:
        """The nodes ``extract.item`` matches; without one, the document element is the only item."""
        if self._item is not None:
            return tree.css(self._item)
        return [tree.root] if tree.root is not None else []

    def _first_matches(
        self, tree: LexborHTMLParser, items: list[LexborNode], tags: int = 0
    ) -> list[dict[str, LexborNode | None]]:
        """Per item, the first node each single-element selector matches in it (or the item itself).

        With many items on a page they fill, each selector runs once over the page and its matches
        go to the item that contains them, cheaper than a query per item (50 KB listing: 85 µs
        against 111). On a page with much besides its items (over :data:`_PAGE_WIDE_MAX_TAGS` tags an
        item), a query per item, which stops at its first match, is cheaper (400 KB listing: 44 µs
        against 263 for the page-wide walks). Nested items query per item.
        """
        crowded = tags > _PAGE_WIDE_MAX_TAGS * len(items)
        if len(items) < _PAGE_WIDE_MIN_ITEMS or not self._singles or crowded or self._nested(tree):
            return [{css: item.css_first(css) for css in self._singles} for item in items]
        index = {item.mem_id: position for position, item in enumerate(items)}
        found: list[dict[str, LexborNode | None]] = [dict.fromkeys(self._singles) for _ in items]
        for css in self._singles:
            for node in tree.css(css):
                owner: LexborNode | None = node
                while owner is not None:
                    position = index.get(owner.mem_id)
                    if position is not None:
                        if found[position][css] is None:
                            found[position][css] = node
                        break
                    owner = owner.parent
        return found

    def _nested(self, tree: LexborHTMLParser) -> bool:
        """True if an item contains another (or that cannot be told)."""
        if self._nested_css is None:
            return True
        try:
            return tree.css_first(self._nested_css) is not None
        except SelectolaxError:
            return True

    def _fields_of(
        self,
        item: LexborNode,
        found: dict[str, LexborNode | None],
        base_url: str,
        page_url: str,
        structured: PageData | None = None,
    ) -> dict[str, Any]:
        """Every field's processed value for one item: None where missing, ``[]`` for a list with no values."""
        data: dict[str, Any] = {}
        for field in self._fields:
            if field.single:  # the common case first: one node the page-wide pass found
                node = found[field.css] if field.css is not None else item
                raw = field.get(node) if node is not None else None
                value: Any = field.pipeline(raw, base_url) if raw is not None else None
                data[field.name] = None if value == "" else value
                continue
            if field.structured is not None:
                raws = field.structured.values(structured, item) if structured is not None else []
                processed = [field.pipeline(raw, base_url) for raw in (raws if field.many else raws[:1])]
                value = [v for v in processed if _present(v)] if field.many else (processed or [None])[0]
                if value == "":
                    value = None
            elif field.page_url:
                value = field.pipeline(page_url, base_url)
                if field.many:
                    value = [value] if _present(value) else []
            else:  # a list
                nodes = item.css(field.css) if field.css is not None else [item]
                values = [field.pipeline(raw, base_url) for raw in map(field.get, nodes) if raw is not None]
                value = [v for v in values if _present(v)]
            data[field.name] = value
        return data

    def _record_key(self, data: dict[str, Any]) -> tuple[str | None, bool]:
        """The key from ``extract.key`` fields, else the ``url`` field (None when neither is there), and
        whether it fell back from the key the spec names."""
        if self._key:
            parts = [data[name] for name in self._key]
            if all(_present(p) for p in parts):
                return "|".join(_key_part(p) for p in parts), False
        url = data.get("url")
        return (url if isinstance(url, str) and url else None), bool(self._key)

    def _links(
        self, tree: LexborHTMLParser, base_url: str, page_url: str, items: list[LexborNode]
    ) -> tuple[list[str], int, dict[str, str], dict[str, int] | None, int]:
        """Canonical in-scope links from the follow selectors, in page order, the out-of-scope count,
        the rule that found each link a page type's rule found, and the links too long to visit.

        A link to the page itself (``href=""``, ``#top``) is no link: it is left out.
        """
        if not self._follow:
            return [], 0, {}, None, 0
        links: list[str] = []
        rules: dict[str, str] = {}
        owners: dict[str, int] = {}
        positions = {item.mem_id: position for position, item in enumerate(items)} if self._item else {}
        seen: set[str] = {_page_key(page_url)}
        out_of_scope = too_long = 0
        judge = self._judge.judge
        for css, rule in self._follow:
            for node in tree.css(css):
                anchors = [node] if node.tag in _LINK_TAGS else node.css("a[href], area[href]")
                for anchor in anchors:
                    verdict = judge(anchor.attrs.get("href"), base_url)
                    if verdict is None or verdict[0] in seen:
                        continue
                    url, allowed = verdict
                    seen.add(url)
                    if allowed and len(url) > MAX_URL:
                        too_long += 1
                    elif allowed:
                        links.append(url)
                        if rule is not None:
                            rules[url] = rule
                            owner = _owner(anchor, positions)
                            if owner is not None:
                                owners[url] = owner
                    else:
                        out_of_scope += 1
        return links, out_of_scope, rules, owners or None, too_long


_heap_pending = True
"""True until the first page has told malloc to keep a heavy page's freed memory (:mod:`sluice.extraction.heap`)."""


def _tune_heap() -> None:
    """:func:`sluice.extraction.heap.tune_heap`, imported by the first page: not a module more in the cold start."""
    global _heap_pending
    from sluice.extraction.heap import tune_heap

    tune_heap()
    _heap_pending = False


def _compile_field(name: str, f: ExtractField) -> _Field:
    if f.selector is None:  # a structured field: no CSS, its value comes from the page's structured data
        path = f.structured_path()
        return _Field(name, None, _own_text, FieldProcessor(f.process).run, f.required, f.many, structured=path)
    return _Field(
        name,
        f.selector.css,
        _getter(f.selector),
        FieldProcessor(f.process).run,
        f.required,
        f.many,
        f.selector.pick == "page_url",
        not f.many and f.selector.pick != "page_url",
    )


_MAX_ITEM_ALTERNATIVES = 8
"""Comma-separated alternatives of ``extract.item`` up to which nesting is looked for with one selector."""


def _nesting_selector(item: str) -> str | None:
    """A selector matching an item inside another item, None when items are taken as nested (queried one by one).

    Every pair of the item selector's alternatives, as plain descendant selectors: lexbor's ``:is()``
    left of a descendant combinator looks at the parent alone, so ``:is(li) :is(li)`` misses a
    ``<li>`` nested one ``<ul>`` down (and plain ``li li`` walks the page in half the time).
    """
    parts = _alternatives(item)
    if parts is None or len(parts) > _MAX_ITEM_ALTERNATIVES:
        return None
    return ", ".join(f"{outer} {inner}" for outer in parts for inner in parts)


def _alternatives(css: str) -> list[str] | None:
    """The comma-separated alternatives of a selector list (commas inside brackets, parentheses or
    quotes, and escaped ones, do not separate); None if its brackets or quotes do not balance."""
    parts: list[str] = []
    depth, quote, start, at = 0, "", 0, 0
    while at < len(css):
        char = css[at]
        if char == "\\":
            at += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
            if depth < 0:
                return None
        elif char == "," and not depth:
            parts.append(css[start:at].strip())
            start = at + 1
        at += 1
    parts.append(css[start:].strip())
    return parts if not quote and not depth and all(parts) else None


def _owner(node: LexborNode, positions: dict[int, int]) -> int | None:
    """The position of the item that holds ``node`` (the innermost), or None if none does."""
    current: LexborNode | None = node
    while current is not None and positions:
        position = positions.get(current.mem_id)
        if position is not None:
            return position
        current = current.parent
    return None


def _base_url(tree: LexborHTMLParser, page_url: str) -> str:
    """The document's base URL: its first ``<base href>`` resolved against ``page_url``, else ``page_url``."""
    for base in tree.tags("base"):
        href = base.attrs.get("href")
        if href is not None:
            return resolve_link(href, page_url) or page_url
    return page_url


def _page_key(page_url: str) -> str:
    try:
        return canonicalize_url(page_url)
    except ValueError:
        return page_url


_extractors: dict[tuple[int, str | None], tuple[CrawlSpec, Extractor]] = {}


def extractor_for(spec: CrawlSpec, kind: str | None = None) -> Extractor:
    """The compiled :class:`Extractor` for ``spec`` (its page type ``kind``), built once per spec object."""
    cached = _extractors.get((id(spec), kind))
    if cached is not None and cached[0] is spec:
        return cached[1]
    extractor = Extractor(spec, kind)
    if len(_extractors) >= _CACHE_SIZE:
        _extractors.pop(next(iter(_extractors)), None)
    _extractors[(id(spec), kind)] = (spec, extractor)
    return extractor


def extract_page(spec: CrawlSpec, page_url: str, html: str | bytes, via: str | None = None) -> PageExtraction:
    """Records and follow links of one page of ``spec``'s crawl; never raises for broken HTML.

    ``via`` is the follow rule whose link led to the page (None for a seed, or a link of
    ``follow.selectors``): with the URL, it says which page type a spec with ``types`` takes it for.
    Raises :class:`~sluice.extraction.limits.PageTooComplex` for a page refused unparsed.
    """
    kind = spec.page_type(page_url, via) if spec.types is not None else None
    return extractor_for(spec, kind).extract(page_url, html)

"""One page explained against a spec: its type and why, each field step by step, each link and its fate.

The records and the in-scope links come from the pipeline's own extraction
(:func:`~sluice.extraction.extract.extractor_for`), so what `sluice parse` shows as kept is what a run
keeps. The walk beside it re-runs each field's selector and steps one by one, to show the raw match
and every step's output, and visits every link the follow selectors find, in scope or not, with the
reason. The tests hold the two walks to the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from sluice.domain.pages import MAX_URL
from sluice.extraction.extract import PageExtraction, _getter, extractor_for
from sluice.extraction.limits import FEW_TAGS, MAX_DEPTH, PageTooComplex, nesting_depth
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.processing import compile_step
from sluice.extraction.structured import PageData
from sluice.extraction.urls import Scope, canonical_link, canonicalize_url
from sluice.pipeline.visit.links import carried_data, with_carried
from sluice.spec import CrawlSpec, ExtractField, ProcessStep, RegexStep, ReplaceStep
from sluice.spec.models import MAX_CARRY_BYTES

_LINK_TAGS = frozenset({"a", "area", "link"})
PLAIN_RULE = "follow.selectors"
"""The rule name a link of the spec's plain ``follow.selectors`` is shown under."""


@dataclass(frozen=True, slots=True)
class PageType:
    """Which page type the page is (None: a one-type spec, or no type takes it) and why, type by type."""

    name: str | None
    reasons: list[str]


@dataclass(frozen=True, slots=True)
class Step:
    step: str
    value: Any


@dataclass(frozen=True, slots=True)
class FieldTrace:
    """One field of one item: what the selector matched, each step's output, the final value."""

    name: str
    selector: str
    required: bool
    matched: int
    """Elements the selector matched in the item (1 for ``::page_url``)."""
    raw: Any
    """The picked text or attribute before any step (a list for a ``many`` field), None if nothing matched."""
    steps: list[list[Step]]
    """Per raw value, each step's output; a step that gives None stops there (the value is missing)."""
    value: Any
    missing: bool
    problems: list[str] = field(default_factory=list)
    """Structured data left out (a JSON-LD block that is not JSON, too large or too deep), which may be why."""


@dataclass(frozen=True, slots=True)
class ItemTrace:
    position: int
    fields: list[FieldTrace]
    kept: bool
    dropped_by: list[str]
    """The required fields the item lacked (it is dropped when any is missing)."""
    key: str | None
    key_fallback: bool
    record: dict[str, Any] | None
    """The record as the run writes it (carried data merged), None for a dropped item."""


@dataclass(frozen=True, slots=True)
class LinkTrace:
    href: str
    url: str | None
    """The canonical URL the run would queue, None when the href is no http(s) link."""
    rule: str
    selector: str
    in_scope: bool
    reason: str | None
    """Why the run does not follow it (scope, depth, robots, length), None when it does."""
    robots: str | None = None
    """robots.txt's answer for the link: ``allowed``, ``disallows``, or why it was not asked."""
    carry: dict[str, Any] | None = None

    @property
    def followed(self) -> bool:
        return self.in_scope and self.reason is None


@dataclass(frozen=True, slots=True)
class Limits:
    nesting: int
    """Estimated element nesting (0: the page has too few tags to be scanned)."""
    max_nesting: int
    body_bytes: int
    max_body_bytes: int
    refused: str | None
    """Why extraction refused the page unparsed (too deep), None when it parsed it."""

    def lines(self) -> list[str]:
        depth = (
            f"nesting {self.nesting} of {self.max_nesting} elements"
            if self.nesting
            else f"nesting not scanned (at most {FEW_TAGS:,} tags cannot reach {self.max_nesting})"
        )
        shown = [depth, f"body {self.body_bytes:,} of {self.max_body_bytes:,} bytes (politeness.max_body_bytes)"]
        if self.refused is not None:
            shown.append(f"refused: {self.refused}")
        return shown


@dataclass(frozen=True, slots=True)
class PageTrace:
    url: str
    type: PageType
    limits: Limits
    item_selector: str | None
    items: list[ItemTrace]
    links: list[LinkTrace]
    depth: int
    carried_in: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    unextracted: str | None = None
    """Why a run takes no records from the page (its URL matches no extract.pages, no type takes it); None: it
    extracts the page's items."""

    @property
    def records(self) -> list[dict[str, Any]]:
        return [i.record for i in self.items if i.record is not None]


def page_type(spec: CrawlSpec, url: str, via: str | None, forced: str | None = None) -> PageType:
    """The type ``spec.page_type`` gives the page, with a reason per type checked (``forced``: ``--type``)."""
    if spec.types is None:
        extract = spec.extract
        assert extract is not None  # noqa: S101 - a one-type spec has extract
        if extract.pages is not None and compile_pattern(extract.pages).search(url) is None:
            return PageType(None, [f"URL does not match extract.pages '{extract.pages}': the page gives links only"])
        why = f"URL matches extract.pages '{extract.pages}'" if extract.pages else "a one-type spec takes every page"
        return PageType(None, [why])
    if forced is not None:
        return PageType(forced, [f"--type {forced} (the URL and the rule that led here are not asked)"])
    reasons: list[str] = []
    came = f"rule {via!r}" if via is not None else "no rule (a seed, or a link of follow.selectors)"
    for name, kind in spec.types.items():
        fits = True
        if kind.pages is not None:
            if compile_pattern(kind.pages).search(url) is None:
                reasons.append(f"{name}: URL does not match types.{name}.pages '{kind.pages}'")
                fits = False
            else:
                reasons.append(f"{name}: URL matches types.{name}.pages '{kind.pages}'")
        if fits and kind.via:
            if via in kind.via:
                reasons.append(f"{name}: reached by {came}, one of types.{name}.via {kind.via}")
            else:
                reasons.append(f"{name}: reached by {came}, not one of types.{name}.via {kind.via}")
                fits = False
        if fits:
            return PageType(name, reasons)
    reasons.append("no type takes the page: its links are followed by follow.selectors only, no records")
    return PageType(None, reasons)


def trace_page(
    spec: CrawlSpec,
    url: str,
    html: str | bytes,
    *,
    via: str | None = None,
    kind: str | None = None,
    depth: int = 0,
    carried_in: Mapping[str, Any] | None = None,
    robots: Mapping[str, str] | None = None,
) -> PageTrace:
    """The page at ``url`` (``html``, as lexbor reads it) explained against ``spec``.

    ``via`` is the rule whose link led here, ``kind`` a type forced by the caller, ``depth`` the page's hops
    from a seed, ``carried_in`` what its linking page carried, ``robots`` robots.txt's answer per link URL.
    """
    typed = page_type(spec, url, via, kind)
    body_bytes = len(html) if isinstance(html, bytes) else len(html.encode("utf-8", "surrogatepass"))
    nesting = nesting_depth(html, stop_at=MAX_DEPTH + 1)
    limits = Limits(nesting, MAX_DEPTH, body_bytes, spec.politeness.max_body_bytes, None)
    extractor = extractor_for(spec, typed.name)
    try:
        extraction = extractor.extract(url, html)
    except PageTooComplex as exc:
        limits = Limits(nesting, MAX_DEPTH, body_bytes, spec.politeness.max_body_bytes, str(exc))
        return PageTrace(url, typed, limits, None, [], [], depth, dict(carried_in) if carried_in else None)
    tree = LexborHTMLParser(html)
    extract = spec.extracts().get(typed.name)
    records = with_carried(extraction.records, carried_in)
    by_position = {r.position: r for r in records}
    items: list[ItemTrace] = []
    item_selector = None
    notes: list[str] = []
    if extract is not None and not (extract.pages and compile_pattern(extract.pages).search(url) is None):
        item_selector = extract.item
        data = PageData(tree)
        nodes = tree.css(extract.item) if extract.item else ([tree.root] if tree.root is not None else [])
        for position, node in enumerate(nodes):
            fields = [_field(name, f, node, url, extraction.base_url, data) for name, f in extract.fields.items()]
            dropped = [f.name for f in fields if f.required and f.missing]
            record = by_position.get(position)
            items.append(
                ItemTrace(
                    position,
                    fields,
                    record is not None,
                    dropped,
                    record.key if record is not None else None,
                    record.key_fallback if record is not None else False,
                    _record_line(record.key, url, record.type, record.data) if record is not None else None,
                )
            )
    elif extract is None and spec.types is not None:
        notes.append("no type takes this page: no records")
    unextracted = None
    if extract is None and spec.types is not None:
        unextracted = "no type takes the page"
    elif extract is not None and extract.pages and compile_pattern(extract.pages).search(url) is None:
        unextracted = f"the page matches no extract.pages pattern ('{extract.pages}')"
    links = _links(spec, typed.name, tree, url, extraction, records, depth, robots or {})
    carried = dict(carried_in) if carried_in else None
    return PageTrace(url, typed, limits, item_selector, items, links, depth, carried, notes, unextracted)


def _record_line(key: str, page: str, type_: str | None, data: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = {"_key": key, "_page": page}
    if type_ is not None:
        line["_type"] = type_
    return line | data


def step_label(step: ProcessStep) -> str:
    if isinstance(step, RegexStep):
        return f"regex {step.regex!r}"
    if isinstance(step, ReplaceStep):
        return f"replace {list(step.replace)!r}"
    return str(step)


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != []


def _run_steps(raw: Any, steps: list[ProcessStep], base_url: str) -> tuple[list[Step], Any]:
    shown: list[Step] = []
    value = raw
    for step in steps:
        value = compile_step(step)(value, base_url)
        shown.append(Step(step_label(step), value))
        if value is None:
            break
    return shown, value


def structured_label(spec_field: ExtractField) -> str:
    of_type = f" of @type {spec_field.type}" if spec_field.type else ""
    return f"{spec_field.structured} {spec_field.path}{of_type}"


def _structured_field(
    name: str, spec_field: ExtractField, item: LexborNode, data: PageData, base_url: str
) -> FieldTrace:
    path = spec_field.structured_path()
    raws = path.values(data, item) if path is not None else []
    steps = list(spec_field.process)
    taken = raws if spec_field.many else raws[:1]
    traces = [_run_steps(raw, steps, base_url) for raw in taken]
    if spec_field.many:
        value: Any = [v for _, v in traces if _present(v)]
    else:
        value = traces[0][1] if traces else None
        value = None if value == "" else value
    return FieldTrace(
        name,
        structured_label(spec_field),
        spec_field.required,
        len(raws),
        raws if spec_field.many else (raws[0] if raws else None),
        [s for s, _ in traces],
        value,
        not _present(value),
        path.problems(data) if path is not None else [],
    )


def _field(
    name: str, spec_field: ExtractField, item: LexborNode, page_url: str, base_url: str, data: PageData
) -> FieldTrace:
    selector = spec_field.selector
    if selector is None:
        return _structured_field(name, spec_field, item, data, base_url)
    steps = list(spec_field.process)
    if selector.pick == "page_url":
        shown, value = _run_steps(page_url, steps, base_url)
        if spec_field.many:
            value = [value] if _present(value) else []
        return FieldTrace(name, selector.source, spec_field.required, 1, page_url, [shown], value, not _present(value))
    get = _getter(selector)
    if spec_field.many:
        nodes = item.css(selector.css) if selector.css is not None else [item]
        raws = [raw for raw in map(get, nodes) if raw is not None]
        traces = [_run_steps(raw, steps, base_url) for raw in raws]
        values = [v for _, v in traces if _present(v)]
        return FieldTrace(
            name, selector.source, spec_field.required, len(nodes), raws, [s for s, _ in traces], values, not values
        )
    node = item.css_first(selector.css) if selector.css is not None else item
    raw = get(node) if node is not None else None
    shown, value = _run_steps(raw, steps, base_url) if raw is not None else ([], None)
    if value == "":
        value = None
    return FieldTrace(
        name, selector.source, spec_field.required, int(node is not None), raw, [shown], value, not _present(value)
    )


def _follow_rules(spec: CrawlSpec, kind: str | None) -> list[tuple[str, str]]:
    """``(css, rule)`` in the order extraction runs them: the type's rules first, then ``follow.selectors``."""
    rules = spec.types[kind].follow if spec.types is not None and kind is not None else {}
    return [
        *((css, name) for name, rule in rules.items() for css in rule.selectors),
        *((css, PLAIN_RULE) for css in spec.follow.selectors),
    ]


def _links(
    spec: CrawlSpec,
    kind: str | None,
    tree: LexborHTMLParser,
    page_url: str,
    extraction: PageExtraction,
    records: list[Any],
    depth: int,
    robots: Mapping[str, str],
) -> list[LinkTrace]:
    scope = Scope.from_spec(spec)
    carried, _ = carried_data(spec, extraction, records)
    at_limit = depth >= spec.follow.depth_limit
    try:
        seen = {canonicalize_url(page_url)}
    except ValueError:
        seen = {page_url}
    links: list[LinkTrace] = []
    for css, rule in _follow_rules(spec, kind):
        for node in tree.css(css):
            anchors = [node] if node.tag in _LINK_TAGS else node.css("a[href], area[href]")
            for anchor in anchors:
                href = anchor.attrs.get("href")
                if href is None:
                    continue
                url = canonical_link(href, extraction.base_url)
                if url is None:
                    links.append(LinkTrace(href, None, rule, css, False, "not an http(s) link"))
                    continue
                if url in seen:
                    continue  # each link once, under the first rule that found it (as extraction does)
                seen.add(url)
                out = scope.reason(url)
                if out is not None:
                    links.append(LinkTrace(href, url, rule, css, False, out))
                    continue
                reason = None
                answer = robots.get(url)
                if at_limit:
                    reason = f"the page is at follow.max_depth ({spec.follow.depth_limit}): its links are not followed"
                elif len(url) > MAX_URL:
                    reason = f"longer than the {MAX_URL} characters a task takes"
                elif answer is not None and answer != "allowed":
                    reason = f"robots.txt: {answer} (the run queues it and skips it when it comes to fetch it)"
                links.append(LinkTrace(href, url, rule, css, True, reason, answer, carried.get(url)))
    return links


def carry_note(spec: CrawlSpec, kind: str | None) -> str:
    """What the type's rules carry, and the bound on it."""
    if spec.types is None or kind is None:
        return ""
    rules = {name: rule.carry for name, rule in spec.types[kind].follow.items() if rule.carry}
    if not rules:
        return ""
    shown = "; ".join(f"{name} carries {', '.join(fields)}" for name, fields in rules.items())
    return f"{shown} (at most {MAX_CARRY_BYTES} bytes of JSON a link, else nothing is carried)"

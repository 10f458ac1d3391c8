"""A page's trace as one JSON object (``--json``) or as text for a person."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from sluice_tools.authoring.page import Page
from sluice_tools.authoring.trace import FieldTrace, PageTrace

_WIDTH = 100


def as_json(page: Page, trace: PageTrace) -> dict[str, Any]:
    """Everything the trace holds, plus where the page came from, in one JSON-ready object."""
    return {
        "page": {
            "url": page.url,
            "final_url": page.final_url,
            "source": page.source,
            "status": page.status,
            "content_type": page.content_type,
            "bytes": len(page.body),
            "robots": page.robots,
            "via": page.via,
            "depth": page.depth,
        },
        "type": asdict(trace.type),
        "limits": asdict(trace.limits),
        "item_selector": trace.item_selector,
        "unextracted": trace.unextracted,
        "items": [asdict(item) for item in trace.items],
        "records": trace.records,
        "links": [asdict(link) | {"followed": link.followed} for link in trace.links],
        "carried_in": trace.carried_in,
        "notes": trace.notes,
    }


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def _field_lines(f: FieldTrace) -> list[str]:
    need = " (required)" if f.required else ""
    head = f"    {f.name}{need}: {f.selector!r} matched {f.matched}, raw {_short(f.raw)}"
    lines = [head]
    for steps in f.steps[:3]:
        if steps:
            lines.append("      " + " -> ".join(f"{s.step}: {_short(s.value)}" for s in steps))
    if len(f.steps) > 3:
        lines.append(f"      ... {len(f.steps) - 3} more value(s)")
    lines.append(f"      = {_short(f.value)}" + ("  (missing)" if f.missing else ""))
    lines.extend(f"      left out: {problem}" for problem in f.problems)
    return lines


def as_text(page: Page, trace: PageTrace) -> str:
    """The trace for a terminal: page, type and why, limits, each item's fields, each link and its fate."""
    out = [
        f"page    {page.url}" + (f" -> {page.final_url}" if page.final_url != page.url else ""),
        f"        from {page.source}: {page.status} {page.content_type}, {len(page.body):,} bytes",
    ]
    if page.robots is not None:
        out.append(f"robots  {page.robots}")
    out.append(f"type    {trace.type.name or '(none)'}")
    out.extend(f"        {reason}" for reason in trace.type.reasons)
    out.extend(f"limits  {line}" if i == 0 else f"        {line}" for i, line in enumerate(trace.limits.lines()))
    if trace.carried_in:
        out.append(f"carried {_short(trace.carried_in)}")
    kept = sum(i.kept for i in trace.items)
    what = f"matched by {trace.item_selector!r}" if trace.item_selector else "(the page is one item)"
    if trace.unextracted is not None:  # nothing was extracted: not "one item" of a page no rule reads
        out.append(
            f"items   none: {trace.unextracted}: in a run it gives no records, only its links (below) are followed"
        )
    else:
        out.append(f"items   {len(trace.items)} {what}: {kept} record(s), {len(trace.items) - kept} dropped")
    for item in trace.items:
        if item.kept:
            fell = " (fallback key)" if item.key_fallback else ""
            out.append(f"  #{item.position} key {item.key}{fell}")
        else:
            out.append(f"  #{item.position} dropped: required {', '.join(item.dropped_by)} missing")
        for f in item.fields:
            out.extend(_field_lines(f))
    followed = sum(link.followed for link in trace.links)
    out.append(f"links   {len(trace.links)} found: {followed} followed, {len(trace.links) - followed} not")
    for link in trace.links:
        mark = "in " if link.followed else "out"
        line = f"  {mark} [{link.rule}] {link.url or link.href}"
        if link.reason is not None:
            line += f"  ({link.reason})"
        if link.carry:
            line += f"  carry {_short(link.carry)}"
        out.append(line)
    out.extend(f"note    {note}" for note in trace.notes)
    return "\n".join(out)

"""The S3 GETs of a many-shard finalize, as docs/costs.md shows them (``python -m bench.finalize_scale --gets``).

`make cost` (bench/cost_report.py) keeps the section when it rewrites the doc; this module imports nothing heavy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sluice.domain.cost import US_EAST_1

FINALIZE_GETS = Path(__file__).resolve().parent / "results" / "finalize-gets.json"
FINALIZE_GETS_SECTION = "## Finalizing in shards: S3 GETs"


def finalize_gets_section(kept: dict[str, Any] | None = None) -> list[str]:
    """The S3 GETs of a sharded finalize, from ``bench.finalize_scale --gets`` (empty when it never ran).

    `make cost`'s runs are one finalize shard each, so they cannot show what a many-shard finalize reads."""
    if kept is None:
        if not FINALIZE_GETS.exists():
            return []
        kept = json.loads(FINALIZE_GETS.read_text(encoding="utf-8"))
    rows = []
    for label, runs in (("by URL shard (before)", kept.get("before") or []), ("by part (now)", kept["runs"])):
        for figures in runs:
            for run in ("first", "nightly"):
                r = figures[run]
                kinds = r["by_kind"]
                parts = kinds.get("parts", 0)
                results = kinds.get("shard results", 0)
                per_page = parts / max(1, r["fetched"])
                rows.append(
                    f"| {label} | {r['shards']} | {run} | {parts:,} | {per_page:.3f} | "
                    f"${per_page * 1e3 * US_EAST_1.s3_per_thousand_get:.3f} | "
                    f"{kinds.get('catalog output', 0):,} | {results:,} |"
                )
    pages = kept["runs"][0]["pages"] if kept["runs"] else 0
    return [
        "",
        FINALIZE_GETS_SECTION,
        "",
        f"`{kept['command']}` ({kept['date']}): {pages:,} synthetic pages (`sluice_tools.synthetic`, 100 a part as",
        "a fetcher batch writes them), a first run and a nightly run (7 in 10 pages reused), finalized with",
        "`finalize_shard_pages` set so the run has 1, 32 and 256 shards, every GET and ranged GET of the store",
        "counted by what it reads. The write phase's part reads are what grows with pages; the shard results grow",
        "with shards squared (about 2N², a few tens of pages a shard here: at 50,000 pages a shard, 256 shards",
        "read about 134,000 of them for 10M pages, $0.005 per million pages). *before* is the same command on the",
        "finalizer whose write tasks were keyed by URL shard (each part read by every shard its pages fall in).",
        "",
        "| write tasks | shards | run | part GETs | a fetched page | $ per million fetched pages | "
        "catalog output GETs | shard-result GETs |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
        *rows,
    ]


def rewrite_finalize_gets(doc: Path, kept: dict[str, Any]) -> None:
    """Put (or replace) the section in docs/costs.md, before its fixed costs."""
    text = doc.read_text(encoding="utf-8")
    body = "\n".join(finalize_gets_section(kept)).lstrip("\n") + "\n\n"
    if FINALIZE_GETS_SECTION in text:
        start = text.index(FINALIZE_GETS_SECTION)
        end = text.find("\n## ", start + len(FINALIZE_GETS_SECTION))
        text = text[:start] + body + (text[end + 1 :] if end != -1 else "")
    else:
        at = text.find("## Fixed, per month")
        text = text[:at] + body + text[at:] if at != -1 else text.rstrip("\n") + "\n\n" + body
    doc.write_text(text, encoding="utf-8")

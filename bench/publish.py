"""Write a bench result into the README's benchmark section and docs/benchmarks.md.

The README's section sits between ``<!-- bench:start -->`` and ``<!-- bench:end -->``: only what lies
between the markers is replaced, every other byte of the README stays. docs/benchmarks.md is
generated whole (``bench.report.markdown``) except the sections other commands append to it
(``bench.many_hosts``, ``bench.finalize_scale --doc``, ``bench.fanout``) or a person wrote there:
any section whose heading is not one this page generates is kept, after the generated ones, in
its order.

``bench.run`` calls :func:`publish` after a whole run; ``python -m bench.report [FILE]`` (``make
bench-report ARGS=FILE``) does it from a result file without measuring.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from bench import report
from bench.rounds import WITHIN

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
README = Path("README.md")
GENERATED = (
    "Method",
    "Results",
    "Heavy pages",
    "Link-heavy pages",
    "Sluice against the best peer, per page variant",
    "Transports",
    "The pipeline on one machine",
    "Finalizing, by run size",
    "Where Sluice's CPU goes",
    "Targets",
    "Machine",
    "Reproduce",
)
"""The headings (before any bracket) of the sections ``report.markdown`` writes, whatever the run."""


class MarkersMissing(ValueError):
    """The README has no benchmark section to replace."""


def replace_section(text: str, body: str, where: str = "README.md") -> str:
    """``text`` with what lies between the markers replaced by ``body``; nothing else changes."""
    start, end = text.find(START), text.find(END)
    if start == -1 or end == -1 or end < start or text.count(START) != 1 or text.count(END) != 1:
        raise MarkersMissing(
            f"{where} needs one {START} and, after it, one {END} around its benchmark table"
            " (bench.publish writes between them and nowhere else)"
        )
    return text[: start + len(START)] + "\n" + body.strip("\n") + "\n" + text[end:]


def _stem(heading: str) -> str:
    return heading.removeprefix("## ").split(" (", 1)[0].strip()


def sections(text: str) -> list[str]:
    """``text`` cut before each '## ' heading: what precedes the first heading, then each section."""
    cuts = [m.start() for m in re.finditer(r"^## ", text, flags=re.MULTILINE)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def kept_sections(old: str) -> list[str]:
    """The sections of an old benchmarks.md that the generator did not write."""
    return [s for s in sections(old) if s.startswith("## ") and _stem(s.splitlines()[0]) not in GENERATED]


def splice_docs(old: str, generated: str) -> str:
    """The generated page, then every section of the old page it does not generate."""
    kept = kept_sections(old)
    if not kept:
        return generated
    return generated.rstrip("\n") + "\n\n" + "\n\n".join(s.strip("\n") for s in kept) + "\n"


def _cell(row: dict[str, Any], client: str, field: str) -> str:
    figures = row.get(client)
    return figures[field].text() if figures else ""


def _variant_sentence(label: str, rows: list[dict[str, Any]]) -> str:
    """'On 50 KB listings Sluice's median CPU a page is 0.99–1.15× the best peer's: ...'."""
    ratios = [r["cpu_vs_best"] for r in rows]
    low, high = min(ratios), max(ratios)
    span = f"{low:.2f}×" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}×"
    by_word: dict[str, list[str]] = {}
    for row in rows:
        by_word.setdefault(row["cpu_verdict"], []).append(str(row["concurrency"]))
    words = {"ahead": "lower", "behind": "higher", WITHIN: WITHIN}
    said = "; ".join(f"{words[w]} at {', '.join(ns)} in flight" for w, ns in by_word.items())
    return f"On {label} Sluice's median CPU a page is {span} the best peer's ({said})."


def comparison_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The README's table: per variant and concurrency, each client's CPU-ms a page, median (min–max);
    Sluice ÷ the best peer by the medians, in words; Sluice's and aiohttp + selectolax's share of the
    limit, and the one ÷ the other (report.comparison says why the share is held against that peer)."""
    lines = [
        "| pages | in flight | Sluice CPU-ms/page | aiohttp + selectolax | Scrapy | recipe "
        "| Sluice ÷ best peer (CPU) | Sluice ÷ limit | aiohttp + selectolax ÷ limit | Sluice ÷ aiohttp + selectolax"
        " (share) |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for row in rows:
        cpu = report.ratio_text(row.get("cpu_vs_best"), row.get("cpu_verdict"))
        share = report.ratio_text(row.get("share_vs_peer"), row.get("share_verdict"))
        lines.append(
            f"| {row['variant']} | {row['concurrency']} | {_cell(row, 'sluice', 'cpu_ms')} |"
            f" {_cell(row, 'peer', 'cpu_ms')} | {_cell(row, 'scrapy', 'cpu_ms')} | {_cell(row, 'recipe', 'cpu_ms')} |"
            f" {cpu} | {_cell(row, 'sluice', 'share')} | {_cell(row, 'peer', 'share')} | {share} |"
        )
    return lines


def _pipeline_cell(run: report.Run | None, crawl: report.Run | None, ratio: bool) -> str:
    if run is None:
        return ""
    said = f"{report.pipeline_pps(run).median:.0f} pages/s"
    if ratio and crawl is not None:
        said += f" ({report.pipeline_ratio(run, crawl).median:.2f}×)"
    return f"{said}, {run['peak_rss_mb']:.0f} MB"


def pipeline_lines(runs: list[report.Run]) -> list[str]:
    """sluice run beside the engine and the stateful Scrapy recipe, a row per size and the docs site."""
    sizes: list[int | str] = sorted({r["size"] for r in runs if isinstance(r.get("size"), int)})
    if any(r.get("size") == "docs" for r in runs):
        sizes.append("docs")
    lines = [
        "| pages | `sluice crawl` (engine) | `sluice run`, first | `sluice run`, nightly | Scrapy + JOBDIR + SQLite |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        docs = size == "docs"
        crawl = report.pipeline_run(runs, size, "sluice", "docs" if docs else "default")
        first = report.pipeline_run(runs, size, "pipeline", "docs" if docs else "first")
        nightly = None if docs else report.pipeline_run(runs, size, "pipeline", "nightly")
        scrapy = None if docs else report.pipeline_run(runs, size, "scrapy_stateful", "batched")
        label = "docs site, 2,021 pages with 200+ links" if docs else f"{size:,}"
        cells = [
            _pipeline_cell(crawl, None, False),
            _pipeline_cell(first, crawl, True),
            _pipeline_cell(nightly, crawl, True),
            _pipeline_cell(scrapy, None, False),
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _measured(result: dict[str, Any]) -> str:
    cfg = result["config"]
    said = [f"{cfg['pages']:,} listing pages"]
    if result.get("heavy"):
        said.append(f"{cfg['heavy']['pages']:,} heavy ones")
    if result.get("docs"):
        said.append("the docs site's 2,021")
    sizes = cfg.get("pipeline", {}).get("pages", [])
    if result.get("pipeline") and sizes:
        said.append("the pipeline at " + " and ".join(f"{s:,}" for s in sizes) + " pages")
    return ", ".join(said)


def _rounds_sentence(result: dict[str, Any]) -> str:
    cfg = result["config"]
    counts = {k: v for k, v in (cfg.get("rounds") or {}).items() if result.get(k)}
    if not cfg.get("rounds"):
        return (
            f"Each Sluice cell is the median of {cfg.get('sluice_repeats', 1)} runs, the lowest and highest in"
            " brackets; the peers ran once (a file from before rounds)."
        )
    where = {"matrix": "50 KB", "heavy": "400 KB", "docs": "docs"}
    said = ", ".join(f"{counts[k]} on {name}" for k, name in where.items() if k in counts)
    return (
        f"Sluice and aiohttp + selectolax ran in alternating rounds (A B, B A, ...; {said}), so the machine's drift"
        " hits both alike; Scrapy and the recipe ran once a cell. Each figure is the median over the rounds,"
        " the lowest and highest in brackets; *within the spread* says the two ranges overlap."
    )


def _notes(result: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """Sentences from the same run: Sluice against the best peer per variant, links, the pipeline."""
    notes = []
    for _, label in report.VARIANTS:
        mine = [r for r in rows if r["variant"] == label and "cpu_vs_best" in r]
        if mine:
            notes.append(_variant_sentence(label, mine))
    links = result.get("breakdown", {}).get("links", {})
    first = next((v for k, v in links.items() if "first sight" in k), None)
    again = next((v for k, v in links.items() if "earlier page" in k), None)
    peer = next((v for k, v in links.items() if k.startswith("urljoin")), None)
    if first is not None and again is not None and peer is not None:
        notes.append(
            f"A page's links are resolved, canonicalized and judged in scope in one pass with ada: {first:.1f} µs a"
            f" link on first sight and {again:.1f} µs for one seen on an earlier page, against {peer:.0f} µs for"
            " `urljoin` + w3lib's `canonicalize_url` + the same scope check (`python -m bench.breakdown`)."
        )
    checks = {c["target"]: c for c in report.targets(result)}
    ratios = [c["value"] for t, c in checks.items() if t.startswith("sluice run ÷ sluice crawl") and c["value"]]
    growth = next((c for t, c in checks.items() if t.startswith("sluice run time per page")), None)
    if ratios:
        said = f"`sluice run` on one host reached {min(ratios):.2f}–{max(ratios):.2f}× the engine's pages/s"
        if growth and growth["value"] is not None:
            said += f"; its time per page from the smallest run to the largest: {growth['value']:.2f}×"
        notes.append(said + ".")
    finalizer = result.get("finalizer") or {}
    per_page = [f["ms_per_page"] for runs in finalizer.values() if isinstance(runs, dict) for f in runs.values()]
    if per_page and "error" not in finalizer:
        sizes = " and ".join(f"{int(p):,}" for p in sorted(finalizer, key=int))
        notes.append(f"Finalizing took {min(per_page):.2f}–{max(per_page):.2f} ms a page at {sizes} pages.")
    return notes


def readme_section(result: dict[str, Any], source: str) -> str:
    """What goes between the README's markers: the run, the comparison table, the pipeline table."""
    machine = result["machine"]
    rows = report.comparison(result)
    lines = [
        f"<!-- Written by `python -m bench.report {source}` (bench/publish.py): edit that, not this. -->",
        "",
        f"One run ({_measured(result)}; `{source}`, {result['started'][:10]}, commit {machine['commit']}) on"
        f" this project's {machine['cores']}-core machine ({machine['cpu_model']}).",
        _rounds_sentence(result),
        "",
        *comparison_lines(rows),
        "",
        " ".join(_notes(result, rows)),
    ]
    if result.get("pipeline"):
        latency = report.latency_of(result)
        concurrency = result["config"].get("pipeline", {}).get("concurrency", 32)
        lines += [
            "",
            f"The whole pipeline on one machine ({concurrency} in flight, {latency:g} ms latency), against the"
            " engine alone and Scrapy with `JOBDIR` and an item pipeline upserting into SQLite (pages/s,"
            " ÷ the engine, peak RSS; the engine and the first run as medians of alternating rounds when"
            " they ran in rounds):",
            "",
            *pipeline_lines(result["pipeline"]),
        ]
    return "\n".join(lines)


def newest_result(results: Path = report.RESULTS) -> Path:
    """The newest whole run's file, ``bench-YYYYMMDD-HHMMSS.json`` (not a --quick or a partial one)."""
    found = sorted(p for p in results.glob("bench-*.json") if re.fullmatch(r"bench-\d{8}-\d{6}\.json", p.name))
    if not found:
        raise FileNotFoundError(f"no bench-YYYYMMDD-HHMMSS.json in {results}: run make bench first")
    return found[-1]


def source_name(path: Path) -> str:
    """How the README names a result file: its path from the checkout's root, or else its name alone."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def publish(result: dict[str, Any], source: str, readme: Path = README, docs: Path = report.DOCS) -> None:
    """Rewrite the README's benchmark section and docs/benchmarks.md from ``result`` (read from ``source``).
    The README is checked first, so a README without markers leaves both files as they were."""
    text = replace_section(readme.read_text(encoding="utf-8"), readme_section(result, source), str(readme))
    old = docs.read_text(encoding="utf-8") if docs.exists() else ""
    docs.write_text(splice_docs(old, report.markdown(result)), encoding="utf-8")
    readme.write_text(text, encoding="utf-8")

"""`sluice report [NAME ...] [--state DIR | --stage STAGE] [--out report.html]`: write the report, print its path.

Exit status 0 when written; 2 when there is nothing to read (no state folder, no such crawl, a stage
out of reach), each said.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sluice.spec import CrawlSpec, SpecError, find_spec, load_spec
from sluice_tools.ops.history import NoSuchRun, RunHistory, open_history
from sluice_tools.ops.stage import StageUnreachable
from sluice_tools.report.history import CrawlHistory, crawl_history
from sluice_tools.report.page import report_html

LAST_RUNS = 30


def _spec(specs: Path, crawl: str) -> CrawlSpec | None:
    """The crawl's spec, for its floor, ceiling and field names (None: the report does without them)."""
    path = find_spec(specs, crawl)
    if path is None:
        return None
    try:
        return load_spec(path)
    except SpecError:
        return None


def histories(history: RunHistory, crawls: list[str], last: int, specs: Path) -> list[CrawlHistory]:
    """Each named crawl's last runs (every crawl there is when none is named)."""
    known = history.crawls()
    unknown = [c for c in crawls if c not in known]
    if unknown:
        raise NoSuchRun(f"no runs of {', '.join(unknown)} in {history.where} (crawls: {', '.join(known) or 'none'})")
    return [crawl_history(history, crawl, last, _spec(specs, crawl)) for crawl in (crawls or known)]


def write_report(history: RunHistory, crawls: list[str], out: Path, *, last: int, specs: Path) -> Path:
    html = report_html(histories(history, crawls, last, specs), history.where)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


def report(args: argparse.Namespace) -> int:
    try:
        history = open_history(Path(args.state), args.stage, Path(args.specs))
        path = write_report(history, list(args.crawls), Path(args.out), last=args.last, specs=Path(args.specs))
    except (NoSuchRun, StageUnreachable) as exc:
        print(f"sluice report: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0

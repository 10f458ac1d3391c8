"""The operating commands' arguments and what each prints: `sluice query`, `runs`, `show`, `logs`, `redrive`,
`reextract`.

Each reads the local state folder (``--state``, as `sluice run` has it) or, with ``--stage``, the
deployed stack your AWS settings point at. Exit status 2: refused, or nothing by that name.
The work is in the modules beside this one; they are imported when their command runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

STATE = ".sluice"
SPECS = "crawls"
MAX_LOG_LINES = 10_000
"""What one Logs Insights query returns at most."""


def _count(most: int) -> Any:
    def parse(text: str) -> int:
        value = int(text)
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"between 1 and {most}")
        return value

    return parse


def _fail(command: str, message: object) -> int:
    print(f"sluice {command}: {message}", file=sys.stderr)
    return 2


def query(args: argparse.Namespace) -> int:
    from sluice_tools.ops.query import QueryError, crawl_tables, run_query
    from sluice_tools.ops.table import render

    tables = crawl_tables(Path(args.state), Path(args.specs))
    for note in tables.notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        columns, rows = run_query(args.sql, tables)
    except QueryError as exc:
        return _fail("query", exc)
    print(render(columns, rows, args.format))
    return 0


def runs(args: argparse.Namespace) -> int:
    from sluice_tools.ops.history import NoSuchRun, fetch_flags, open_history
    from sluice_tools.ops.runs import recent, resume_hint, runs_table
    from sluice_tools.ops.stage import StageUnreachable

    try:
        history = open_history(Path(args.state), args.stage, Path(args.specs))
        rows = recent(history, args.crawl, args.limit)
    except (NoSuchRun, StageUnreachable) as exc:
        return _fail("runs", exc)
    for row in rows:
        if row.status == "interrupted":
            hint = resume_hint(row.crawl, args.specs, args.state, fetch_flags(history, row.crawl, row.run_id))
            print(f"note: run {row.run_id} {hint}", file=sys.stderr)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    elif not rows:
        print(f"{args.crawl}: no runs yet in {history.where}")
    else:
        print(runs_table(rows))
    return 0


def show(args: argparse.Namespace) -> int:
    from sluice_tools.ops.history import NoSuchRun, emulated_run, open_history, run_named
    from sluice_tools.ops.show import report
    from sluice_tools.ops.stage import StageUnreachable

    try:
        history = open_history(Path(args.state), args.stage, Path(args.specs))
        found = report(history, run_named(history, args.run_id), specs=args.specs, state=args.state)
    except NoSuchRun as exc:
        emulated = emulated_run(Path(args.state), args.run_id) if args.stage is None else None
        return _fail("show", emulated or exc)
    except StageUnreachable as exc:
        return _fail("show", exc)
    print(json.dumps(found.as_json(), indent=2) if args.json else found.text())
    return 0


def logs(args: argparse.Namespace) -> int:
    from sluice_tools.ops.history import (
        LocalHistory,
        NoSuchRun,
        StageHistory,
        emulated_logs,
        open_history,
        run_named,
    )
    from sluice_tools.ops.logs import LogFilter, local_lines, stage_lines
    from sluice_tools.ops.stage import StageUnreachable

    flt = LogFilter(level=args.level, grep=args.grep, url=args.url, limit=args.limit)
    try:
        history = open_history(Path(args.state), args.stage, Path(args.specs))
        run = run_named(history, args.run_id)
        if isinstance(history, StageHistory):
            lines = stage_lines(history.stage, run, flt)
        else:
            assert isinstance(history, LocalHistory)  # noqa: S101 - open_history gives one of the two
            lines = local_lines(history.log_file(run), run, flt)
    except NoSuchRun as exc:
        emulated = emulated_logs(Path(args.state), args.run_id) if args.stage is None else None
        return _fail("logs", emulated or exc)
    except StageUnreachable as exc:
        return _fail("logs", exc)
    for line in lines:
        print(line.raw if args.json else line.text())
    if len(lines) >= flt.limit:
        print(f"(the first {flt.limit} lines: --limit shows more)", file=sys.stderr)
    return 0


def redrive(args: argparse.Namespace) -> int:
    from sluice_tools.ops.history import NoSuchRun
    from sluice_tools.ops.redrive import MalformedDeadLetters, Redrive, redrive_local, redrive_stage
    from sluice_tools.ops.stage import Stage, StageUnreachable

    try:
        done: Redrive = (
            redrive_stage(Stage.named(args.stage), purge_malformed=args.purge_malformed)
            if args.stage is not None
            else redrive_local(Path(args.state), purge_malformed=args.purge_malformed)
        )
    except MalformedDeadLetters as exc:
        if args.json:
            print(json.dumps({"refused": str(exc), **exc.found.as_json()}, indent=2))
        return _fail("redrive", f"refused: {exc}")
    except (NoSuchRun, StageUnreachable) as exc:
        return _fail("redrive", exc)
    print(json.dumps(done.as_json(), indent=2) if args.json else done.text())
    return 0


def reextract(args: argparse.Namespace) -> int:
    from sluice.pipeline.reextract import Projection, Reextracted, ReextractRefused, ReextractWorse
    from sluice.spec import SpecError
    from sluice_tools.ops.history import NoSuchRun
    from sluice_tools.ops.reextract import project_local, project_stage, reextract_local, reextract_stage, report
    from sluice_tools.ops.stage import Stage, StageUnreachable
    from sluice_tools.runner.session import StateInUse

    spec = Path(args.spec) if args.spec else None
    where = (args.run_id, spec, Path(args.specs))
    done: Reextracted | Projection
    try:
        if args.dry_run:
            done = (
                project_stage(Stage.named(args.stage), *where)
                if args.stage is not None
                else project_local(Path(args.state), *where)
            )
        elif args.stage is not None:
            done = reextract_stage(Stage.named(args.stage), *where, force=args.force)
        else:
            done = reextract_local(Path(args.state), *where, force=args.force)
    except ReextractWorse as exc:
        if args.json:
            print(json.dumps({"refused": str(exc), **dataclasses.asdict(exc.projection)}, indent=2))
        return _fail("reextract", f"refused: {exc}")
    except (ReextractRefused, StateInUse) as exc:
        return _fail("reextract", f"refused: {exc}")
    except (NoSuchRun, StageUnreachable, SpecError) as exc:
        return _fail("reextract", exc)
    if isinstance(done, Projection):
        print(json.dumps(dataclasses.asdict(done), indent=2) if args.json else f"dry run: {done.text()}")
        return 1 if done.worse else 0
    print(json.dumps(done.summary.to_json(), indent=2, sort_keys=True) if args.json else report(done))
    return 0 if done.summary.healthy else 1


def _where(parser: argparse.ArgumentParser, *, specs: bool = True) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--state", default=STATE, help=f"the local state folder `sluice run` keeps (default {STATE})")
    where.add_argument(
        "--stage",
        nargs="?",
        const="dev",
        default=None,
        help="read the deployed stage instead (default dev), with your AWS settings",
    )
    if specs:
        parser.add_argument("--specs", default=SPECS, help=f"the crawl specs folder (default {SPECS}/)")


def add_commands(commands: Any) -> None:
    """The operating commands, on `sluice`'s subcommand parser."""
    from sluice_tools.report.command import LAST_RUNS, report

    rp = commands.add_parser("report", help="the last runs of each crawl drawn in one self-contained HTML file")
    rp.add_argument("crawls", nargs="*", metavar="NAME", help="crawls to draw (default: every crawl there is)")
    _where(rp)
    rp.add_argument("--out", default="report.html", help="the file to write (default report.html)")
    rp.add_argument("--last", type=_count(1000), default=LAST_RUNS, help=f"runs per crawl (default {LAST_RUNS})")
    rp.set_defaults(run=report)
    q = commands.add_parser("query", help="SQL over the local output with DuckDB: a table per crawl, as on Athena")
    q.add_argument("sql", metavar="SQL", help="e.g. \"SELECT count(*) FROM demo_books WHERE run = 'RUN_ID'\"")
    q.add_argument("--state", default=STATE, help=f"the local state folder `sluice run` keeps (default {STATE})")
    q.add_argument("--specs", default=SPECS, help=f"the crawls' specs, to type their columns (default {SPECS}/)")
    q.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help="table (cells cut at 80 characters), csv or json (whole values)",
    )
    q.set_defaults(run=query)

    r = commands.add_parser("runs", help="a crawl's last runs: status, verdict, pages, records, cost, duration")
    r.add_argument("crawl", metavar="NAME", help="the crawl's name")
    _where(r)
    r.add_argument("--limit", type=_count(1000), default=10, help="how many runs, newest first (default 10)")
    r.add_argument("--json", action="store_true", help="one JSON array, a run an object")
    r.set_defaults(run=runs)

    s = commands.add_parser("show", help="one run: its summary, failed checks, failure reasons, null rates, outputs")
    s.add_argument("run_id", metavar="RUN", help="the run's id (as `sluice runs` lists it)")
    _where(s)
    s.add_argument("--json", action="store_true", help="the run, its whole summary and its outputs as JSON")
    s.set_defaults(run=show)

    lg = commands.add_parser("logs", help="a run's log lines (local file, or CloudWatch Logs Insights with --stage)")
    lg.add_argument("run_id", metavar="RUN", help="the run's id (as `sluice runs` lists it)")
    _where(lg)
    lg.add_argument(
        "--level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="this level and above",
    )
    lg.add_argument("--grep", metavar="TEXT", help="lines containing TEXT")
    lg.add_argument("--url", metavar="TEXT", help="lines about a URL containing TEXT")
    lg.add_argument("--limit", type=_count(MAX_LOG_LINES), default=1000, help="at most this many lines (default 1000)")
    lg.add_argument("--json", action="store_true", help="the JSON lines as written")
    lg.set_defaults(run=logs)

    d = commands.add_parser("redrive", help="move dead letters back to the frontier (refuses malformed ones)")
    _where(d, specs=False)
    d.add_argument(
        "--purge-malformed", action="store_true", help="delete dead letters that are no valid message, then redrive"
    )
    d.add_argument("--json", action="store_true", help="what was found and done, as one JSON object")
    d.set_defaults(run=redrive)

    x = commands.add_parser(
        "reextract", help="rebuild a finished run's records from its raw archive with a changed spec (no request)"
    )
    x.add_argument("run_id", metavar="RUN", help="a finished run's id, whose archive is read")
    x.add_argument("--spec", metavar="SPEC", help="the spec to extract with (default: the crawl's in --specs)")
    _where(x)
    x.add_argument(
        "--force",
        action="store_true",
        help="replace the run's records even when the new ones would fail its record checks (none, or a drop "
        "below the spec's alerts.record_count_floor): refused without it, nothing replaced",
    )
    x.add_argument(
        "--dry-run", action="store_true", help="extract and count, write nothing: what the run's records would be"
    )
    x.add_argument("--json", action="store_true", help="the run's new summary as JSON")
    x.set_defaults(run=reextract)

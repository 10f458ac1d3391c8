"""The operating commands' arguments and what each prints: `sluice query`.

Each reads the local state folder (``--state``, as `sluice run` has it). Exit status 2: refused.
The work is in the modules beside this one; they are imported when their command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

STATE = ".sluice"
SPECS = "crawls"


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


def add_commands(commands: Any) -> None:
    """The operating commands, on `sluice`'s subcommand parser."""
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

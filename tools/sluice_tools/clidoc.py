"""docs/cli.md from the ``sluice`` parsers themselves: every command and every flag, with its default and help.

``python -m sluice_tools.clidoc`` rewrites the file; a test fails when it differs from what the parsers say.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sluice_tools.cli import build_parser
from sluice_tools.demosite.cli import build_parser as demo_site_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

HEADER = """# The `sluice` command, flag by flag

Generated from the command's own parsers (`python -m sluice_tools.clidoc`; a test fails when this
file and the parsers disagree). `sluice COMMAND --help` says the same. The README and
[operations](operations.md) show the commands at work. `sluice --version` prints the installed
package's version.
"""


def commands() -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, one-line help) of each ``sluice`` subcommand, ``demo-site``'s own parser in its place."""
    found = []
    for action in build_parser()._subparsers._group_actions:  # type: ignore[union-attr]
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, parser in action.choices.items():
                found.append((name, demo_site_parser() if name == "demo-site" else parser, helps.get(name, "")))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _usage(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return flag
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"{flag} {metavar}"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    return f"`{action.default}`"


def render() -> str:
    parts = [HEADER]
    for name, parser, summary in commands():
        rows = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        parts.append(f"\n## `sluice {name}`\n\n{_cell(summary)}\n")
        if not rows:
            continue
        parts.append("\n| argument | default | meaning |\n|---|---|---|\n")
        for action in rows:
            parts.append(f"| `sluice {name} {_usage(action)}` | {_default(action)} | {_cell(action.help or '')} |\n")
    return "".join(parts)


def main() -> int:
    DOC.write_text(render(), encoding="utf-8")
    print(f"wrote {DOC.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

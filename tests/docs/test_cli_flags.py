"""Every flag of the `sluice` CLI is documented: some paragraph of the README or docs/ names the command
and the flag together (walked from the parsers themselves, so a new flag without a word fails here)."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from sluice_tools.cli import main
from sluice_tools.clidoc import DOC, commands, render

ROOT = Path(__file__).resolve().parents[2]


def cli_flags() -> list[tuple[str, str]]:
    """(command, flag) for every subcommand of ``sluice`` and every flag it takes, demo-site's own included."""
    return [
        (name, option)
        for name, parser, _ in commands()
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]


def _blocks() -> list[str]:
    texts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
    return [block for text in texts for block in re.split(r"\n\s*\n", text)]


def test_the_walk_finds_the_commands_flags() -> None:
    flags = cli_flags()
    assert ("run", "--state") in flags
    assert ("demo-site", "--fail-503") in flags
    assert ("reextract", "--specs") in flags


def test_every_flag_is_documented_beside_its_command() -> None:
    blocks = _blocks()
    undocumented = []
    for command, flag in cli_flags():
        named = re.compile(rf"sluice {re.escape(command)}\b")
        spelled = re.compile(rf"{re.escape(flag)}(?![\w-])")
        if not any(named.search(b) and spelled.search(b) for b in blocks):
            undocumented.append(f"sluice {command} {flag}")
    assert undocumented == [], f"flags no paragraph of README.md or docs/ names with their command: {undocumented}"


def test_every_argument_says_what_it_is() -> None:
    silent = [
        f"sluice {name} {action.dest}"
        for name, parser, _ in commands()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert silent == []


def test_the_cli_reference_is_what_the_parsers_say() -> None:
    # docs/cli.md is written by `python -m sluice_tools.clidoc`: run it after changing a flag.
    assert DOC.read_text(encoding="utf-8") == render()


def test_help_shows_no_rst_literals(capsys: pytest.CaptureFixture[str]) -> None:
    """`sluice --help` printed the module docstring's ``sluice`` with its double backticks."""
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "The sluice command: validate specs" in " ".join(top.split())
    helps = [top] + [parser.format_help() for _, parser, _ in commands()]
    assert [h for h in helps if "``" in h] == []


def test_version_prints_the_packages_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert capsys.readouterr().out.strip() == f"sluice {pyproject['project']['version']}"

"""`make help` names every target the Makefile declares phony (and nothing it does not have)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _phony_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    (line,) = re.findall(r"^\.PHONY:(.*)$", text, flags=re.MULTILINE)
    return set(line.split())


def test_make_help_lists_every_phony_target() -> None:
    make = shutil.which("make")
    assert make is not None, "make is not installed"
    out = subprocess.run([make, "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout  # noqa: S603
    listed = set(re.findall(r"^make (\S+)", out, flags=re.MULTILINE))
    assert listed == _phony_targets()

"""A command whose reader went away (`sluice validate ... | head -c 1`) stops quietly, with no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_stdout_stops_the_command_with_the_shells_code_and_no_traceback() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools", "."))}
    spec = ROOT / "crawls" / "demo-books.yaml"
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line
    try:
        done = subprocess.run(  # noqa: S603 - the project's own CLI, on a bundled spec
            [sys.executable, "-m", "sluice_tools.cli", "validate", str(spec)],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    said = done.stderr.decode()
    assert "Traceback" not in said, said
    assert "BrokenPipeError" not in said, said
    assert done.returncode == 141

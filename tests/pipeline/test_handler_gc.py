"""A Lambda container's cycle collector: set once by each handler's import, after its cold-start imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.collector import YOUNG_OBJECTS

ROOT = Path(__file__).resolve().parents[2]
_PROBE = """
import gc, json, sys
before = gc.get_threshold()
import {module}
print(json.dumps({{"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "tracked": len(gc.get_objects())}}))
"""


@pytest.mark.parametrize("handler", ["fetcher", "scheduler", "finalizer"])
def test_a_handlers_import_freezes_what_it_loaded_and_raises_the_young_threshold(handler: str, tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools")),
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "AWS_LAMBDA_FUNCTION_NAME": f"sluice-dev-{handler}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
    }
    script = _PROBE.format(module=f"sluice.handlers.{handler}")
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(answer.stdout.strip().splitlines()[-1])
    assert seen["before"][0] != YOUNG_OBJECTS
    assert seen["after"] == [YOUNG_OBJECTS, *seen["before"][1:]]
    # The modules' objects are frozen: no collection walks them, and few are left for one to.
    assert seen["frozen"] > 20_000
    assert seen["tracked"] < seen["frozen"] // 10

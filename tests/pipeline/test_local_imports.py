"""What a local run loads with its runner, before the run starts: the fetcher's HTTP stack.

A Lambda fetcher loads it on its first request (its cold start stays short: tests/fetch/test_cold_import.py);
a local run loaded it the same way, so every host of a run waited on the import (about 0.23 CPU-s, more under
load) before its first page, and each worker process imported it again after the fork. The runner imports it,
so ``sluice run`` pays it once, before its run's clock, and worker processes inherit it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HTTP_STACK = ("aiohttp", "aiohttp.connector", "httpx", "httpx_aiohttp", "sluice.fetch.transport")


def _loaded_after(module: str) -> dict[str, bool]:
    script = f"import json, sys\nimport {module}\nprint(json.dumps({{m: m in sys.modules for m in {HTTP_STACK!r}}}))"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools"))}
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    loaded: dict[str, bool] = json.loads(answer.stdout.strip().splitlines()[-1])
    return loaded


def test_the_local_runner_loads_the_fetchers_http_stack_before_any_run_starts() -> None:
    assert _loaded_after("sluice_tools.runner.local") == dict.fromkeys(HTTP_STACK, True)


def test_the_fetchers_step_alone_still_leaves_it_to_the_first_request() -> None:
    # The batch's own modules (what the fetcher handler imports) do not load it: only the runner does.
    assert _loaded_after("sluice.pipeline.visit.batch") == dict.fromkeys(HTTP_STACK, False)

"""The fetcher's (and the scheduler's) cold start loads only what every batch needs; the rest waits for the
batch that does.

Guarded by what a fresh interpreter holds after the import, not by a stopwatch: ``make layer-report``
measures the time (README, Measured). The HTTP stack (aiohttp, with the verified SSL context it builds
when imported), PyYAML and the finalizer's Parquet copy are each about 10-100 ms of a cold start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOADED_LATER = ("aiohttp", "aiohttp.connector", "httpx_aiohttp", "yaml", "sluice.pipeline.finalize.columnar")
"""Not loaded by the fetcher's import: the HTTP stack (first request), YAML (a YAML spec file), the Parquet copy
(the finalizer's alone)."""


def _loaded_after(script: str, tmp_path: Path) -> dict[str, bool]:
    """Which of :data:`LOADED_LATER` a fresh interpreter holds after running ``script`` as Lambda would."""
    probe = f"{script}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {LOADED_LATER!r}}}))"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools")),
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "AWS_LAMBDA_FUNCTION_NAME": "sluice-dev-fetcher",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
    }
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", probe], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    loaded: dict[str, bool] = json.loads(answer.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("handler", ["fetcher", "scheduler"])
def test_importing_a_handler_loads_no_http_stack_no_yaml_and_no_parquet_copy(tmp_path: Path, handler: str) -> None:
    loaded = _loaded_after(f"import sluice.handlers.{handler}", tmp_path)
    assert loaded == dict.fromkeys(LOADED_LATER, False)


def test_a_json_spec_is_read_without_yaml_and_a_yaml_one_with_it(tmp_path: Path) -> None:
    spec = {"name": "cold", "seeds": {"urls": ["https://example.com/"]}, "extract": {"fields": {"title": "title"}}}
    (tmp_path / "cold.json").write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "cold.yaml").write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML too
    read = "from sluice.spec import load_spec\nassert load_spec({!r}).name == 'cold'"
    assert _loaded_after(read.format(str(tmp_path / "cold.json")), tmp_path)["yaml"] is False
    assert _loaded_after(read.format(str(tmp_path / "cold.yaml")), tmp_path)["yaml"] is True


def test_the_http_stack_is_loaded_by_the_first_request(tmp_path: Path) -> None:
    script = (
        "import asyncio\n"
        "from sluice.fetch.client import PageFetcher\n"
        "from sluice.spec import Politeness\n"
        "async def main():\n"
        "    politeness = Politeness(obey_robots=False, timeout_seconds=2)\n"
        "    async with PageFetcher(politeness, allow_loopback=True) as fetcher:\n"
        "        await fetcher.fetch('http://127.0.0.1:9/', max_attempts=1)\n"  # the discard port: refused or silent
        "asyncio.run(main())"
    )
    assert _loaded_after(script, tmp_path)["aiohttp"] is True

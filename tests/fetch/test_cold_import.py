"""The fetcher's (and the scheduler's) cold start loads only what every batch needs; the rest waits for the
batch that does.

Guarded by what a fresh interpreter holds after the import, not by a stopwatch: ``make layer-report``
measures the time (README, Measured). The HTTP stack (aiohttp, with the verified SSL context it builds
when imported, and httpx, the API the fetch path is written against), PyYAML and the finalizer's Parquet
copy are each about 10-100 ms of a cold start; so are the validators of the spec's and the messages' models
(pydantic builds them when first used, not when their classes are made).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.messages import MalformedMessage, StartEvent, parse_body

ROOT = Path(__file__).resolve().parents[2]
LOADED_LATER = ("aiohttp", "aiohttp.connector", "httpx", "httpx_aiohttp", "yaml", "sluice.pipeline.finalize.columnar")
"""Not loaded by the fetcher's import: the HTTP stack (first request), YAML (a YAML spec file), the Parquet copy
(the finalizer's alone)."""
_BUILT = """
import json, sys
from pydantic import BaseModel
models = {m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("sluice.")}
ours = [c for m in models for c in vars(m).values()
        if isinstance(c, type) and issubclass(c, BaseModel) and c.__module__ == m.__name__]
print(json.dumps({"models": len(ours), "built": sorted(c.__qualname__ for c in ours if c.__pydantic_complete__),
                  "httpx": "httpx" in sys.modules, "said": globals().get("said")}))
"""
"""What a fresh interpreter holds after a script: how many of our pydantic models, which of them have their
validators built, whether httpx is loaded (and what the script put in ``said``)."""


def _run(script: str, tmp_path: Path) -> Any:
    """The JSON a fresh interpreter prints last, running ``script`` as Lambda would."""
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools")),
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "AWS_LAMBDA_FUNCTION_NAME": "sluice-dev-fetcher",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
    }
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(answer.stdout.strip().splitlines()[-1])


def _loaded_after(script: str, tmp_path: Path) -> dict[str, bool]:
    """Which of :data:`LOADED_LATER` a fresh interpreter holds after running ``script`` as Lambda would."""
    probe = f"{script}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {LOADED_LATER!r}}}))"
    loaded: dict[str, bool] = _run(probe, tmp_path)
    return loaded


@pytest.mark.parametrize("handler", ["fetcher", "scheduler"])
def test_importing_a_handler_loads_no_http_stack_no_yaml_and_no_parquet_copy(tmp_path: Path, handler: str) -> None:
    loaded = _loaded_after(f"import sluice.handlers.{handler}", tmp_path)
    assert loaded == dict.fromkeys(LOADED_LATER, False)


@pytest.mark.parametrize("handler", ["fetcher", "scheduler", "finalizer"])
def test_importing_a_handler_builds_no_validator_of_ours_and_loads_no_httpx(tmp_path: Path, handler: str) -> None:
    after = _run(f"import sluice.handlers.{handler}\n{_BUILT}", tmp_path)
    assert after["models"] > 20  # the spec's, the messages' and the settings' models are all defined...
    assert after["built"] == []  # ...and none has built its validator: the first one used builds its own
    assert after["httpx"] is False


def test_a_model_builds_its_validator_when_first_used_and_validates_as_it_always_did(tmp_path: Path) -> None:
    script = (
        "import sluice.handlers.fetcher\n"
        "from sluice.messages import MalformedMessage, StartEvent, parse_body\n"
        "try:\n"
        "    parse_body(StartEvent, {'crawl': 'Bad Name', 'offset': -1})\n"
        "except MalformedMessage as exc:\n"
        "    said = str(exc)\n"
        f"{_BUILT}"
    )
    after = _run(script, tmp_path)
    with pytest.raises(MalformedMessage) as built_here:  # this interpreter's validator, built long ago
        parse_body(StartEvent, {"crawl": "Bad Name", "offset": -1})
    assert after["said"] == str(built_here.value)
    assert "StartEvent" in after["built"]
    assert "CrawlSpec" not in after["built"]  # what a step never used is never built
    assert after["httpx"] is False


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
    loaded = _loaded_after(script, tmp_path)
    assert loaded["aiohttp"] is True
    assert loaded["httpx"] is True

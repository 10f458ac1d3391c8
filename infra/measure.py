"""``make layer-report``: the layer's size, and the handlers' cold import time from the built layer.

The deployed layer is built for arm64; its native extensions cannot load on an x86_64 machine.
So the import check builds the same requirements for this machine's platform, with the same
Python minor version as the Lambda runtime, and imports every handler from that layer plus the
code asset, with boto3 beside them as the runtime provides it. Same packages, same versions,
same code; only the platform tag of the wheels differs.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from infra.bundling import _compile, _interpreter, build_code, build_layer, layer_size, wheel_platforms
from infra.config import DEFAULT

HANDLERS = [DEFAULT.scheduler.handler, DEFAULT.fetcher.handler, DEFAULT.finalizer.handler]
BOTO3 = next(
    line.strip() for line in (Path(__file__).resolve().parents[1] / "requirements-dev.txt").read_text().splitlines()
    if line.startswith("boto3==")
)  # fmt: skip
_PROBE = """
import importlib, json, sys, time
started = time.perf_counter()
import botocore.config, botocore.session  # the runtime's: every function that calls AWS pays this
runtime = time.perf_counter()
importlib.import_module(sys.argv[1].rsplit(".", 1)[0])
done = time.perf_counter()
print(json.dumps({"python": sys.version.split()[0], "botocore_ms": (runtime - started) * 1000,
                  "handler_ms": (done - runtime) * 1000}))
"""


def python_version() -> str:
    return DEFAULT.runtime.removeprefix("python")


def zipped_size(folder: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "layer.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(folder.rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(folder))
        return path.stat().st_size


def _env(work: Path, *, traced: bool = True) -> dict[str, str]:
    lambda_only = {
        # As in Lambda: the tracer is on, so its import and its patching of botocore are counted.
        "LAMBDA_TASK_ROOT": str(work / "code"),
        "AWS_LAMBDA_FUNCTION_NAME": "sluice-measure",
    }
    return {
        "PYTHONPATH": f"{work / 'code'}:{work / 'layer' / 'python'}:{work / 'runtime'}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
        "AWS_DEFAULT_REGION": "us-east-1",
        **(lambda_only if traced else {}),
    }


def _time_imports(python: str, work: Path, *, traced: bool = True) -> dict[str, dict[str, float]]:
    """Each handler imported cold in a fresh process: the runtime's botocore first, then the handler."""
    timings: dict[str, dict[str, float]] = {}
    for handler in HANDLERS:
        answer = subprocess.run(  # noqa: S603
            [python, "-c", _PROBE, handler],
            capture_output=True,
            text=True,
            env=_env(work, traced=traced),
            check=True,
            cwd=work,
        )
        timings[handler.split(".")[-2]] = json.loads(answer.stdout.strip().splitlines()[-1])
    return timings


def import_handlers(work: Path) -> dict[str, Any]:
    """Build the host-platform twin of the layer and the code asset; import every handler cold."""
    version = python_version()
    python = _interpreter(version)
    build_layer(work / "layer" / "python", wheel_platforms(platform.machine()), version)
    build_code(work / "code", version)
    subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", BOTO3, "--target",
         str(work / "runtime"), "--python-version", version, "--only-binary=:all:", "--no-compile"],
        check=True,
    )  # fmt: skip
    _compile(work / "runtime", version)  # the runtime's boto3 and botocore ship compiled, as the layer does
    timings = _time_imports(python or sys.executable, work)
    return {
        "python": next(iter(timings.values()))["python"],
        "interpreter_matches_runtime": python is not None,
        "handlers": timings,
    }


def report(rounds: int = 5) -> dict[str, Any]:
    """Layer sizes, and each handler's cold import time: the median of ``rounds`` fresh processes."""
    version = python_version()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        target = work / "arm" / "python"
        build_layer(target, wheel_platforms("aarch64"), version)
        sizes = {
            "unzipped_mb": round(layer_size(target.parent) / 1e6, 1),
            "zipped_mb": round(zipped_size(target.parent) / 1e6, 1),
        }
        first = import_handlers(work / "host")
        python = _interpreter(version) or sys.executable
        # Each round a traced import (as in Lambda) and an untraced one (outside Lambda the tracer is
        # never imported), interleaved so that the machine's load falls on both alike: the traced ones
        # are the cold imports reported, the difference the tracer's share.
        paired = [
            (_time_imports(python, work / "host"), _time_imports(python, work / "host", traced=False))
            for _ in range(2 * rounds)
        ]
        runs = [first["handlers"], *(on for on, _ in paired)]
    medians = {
        name: {
            key: round(statistics.median(run[name][key] for run in runs), 1) for key in ("botocore_ms", "handler_ms")
        }
        for name in first["handlers"]
    }
    tracer = {
        name: round(
            statistics.median(on[name]["handler_ms"] for on, _ in paired)
            - statistics.median(off[name]["handler_ms"] for _, off in paired),
            1,
        )
        for name in first["handlers"]
    }
    return {
        "layer": sizes,
        "python": first["python"],
        "rounds": len(runs),
        "cold_import_ms_median": medians,
        "tracer_share_of_handler_ms": tracer,
    }


if __name__ == "__main__":
    print(json.dumps(report(), indent=2))

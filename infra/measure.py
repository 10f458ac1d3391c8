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
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from infra.bundling import _interpreter, build_code, build_layer, layer_size
from infra.config import DEFAULT

HANDLERS = [DEFAULT.scheduler.handler, DEFAULT.fetcher.handler, DEFAULT.finalizer.handler]
BOTO3 = next(
    line.strip() for line in (Path(__file__).resolve().parents[1] / "requirements-dev.txt").read_text().splitlines()
    if line.startswith("boto3==")
)  # fmt: skip
_PROBE = """
import importlib, json, sys, time
started = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name.rsplit(".", 1)[0])
print(json.dumps({"python": sys.version.split()[0], "import_ms": (time.perf_counter() - started) * 1000}))
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


def import_handlers(work: Path) -> dict[str, object]:
    """Build the host-platform twin of the layer and the code asset; import every handler cold."""
    version = python_version()
    python = _interpreter(version)
    host = f"manylinux2014_{platform.machine()}"
    build_layer(work / "layer" / "python", host, version)
    build_code(work / "code", version)
    runtime = work / "runtime"
    subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", BOTO3, "--target",
         str(runtime), "--python-version", version, "--only-binary=:all:", "--no-compile"],
        check=True,
    )  # fmt: skip
    interpreter = python or sys.executable
    env = {
        "PYTHONPATH": f"{work / 'code'}:{work / 'layer' / 'python'}:{runtime}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    answer = subprocess.run(  # noqa: S603
        [interpreter, "-c", _PROBE, *HANDLERS],
        capture_output=True, text=True, env=env, check=True, cwd=work,
    )  # fmt: skip
    result: dict[str, object] = json.loads(answer.stdout.strip().splitlines()[-1])
    result["interpreter_matches_runtime"] = python is not None
    return result


def report() -> dict[str, object]:
    version = python_version()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        target = work / "arm" / "python"
        build_layer(target, "manylinux2014_aarch64", version)
        sizes = {
            "unzipped_mb": round(layer_size(target.parent) / 1e6, 1),
            "zipped_mb": round(zipped_size(target.parent) / 1e6, 1),
        }
        shutil.rmtree(work / "arm")
        imports = [import_handlers(work / f"host{i}") for i in range(3)]
    return {
        "layer": sizes,
        "cold_import_ms": [round(float(str(i["import_ms"])), 1) for i in imports],
        "python": imports[0]["python"],
    }


if __name__ == "__main__":
    print(json.dumps(report(), indent=2))

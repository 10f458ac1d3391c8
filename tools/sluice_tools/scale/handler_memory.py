"""Each Lambda handler's base memory: its module imported and its AWS clients built, in a fresh interpreter.

``python -m sluice_tools.scale.handler_memory`` writes ``bench/results/handler-rss.json``, which the scale model
reads as every function's base (with the engine's peak, whichever is higher). Building the services makes the
handler's botocore clients (DynamoDB, S3, SQS, and the finalizer's Athena copy); it calls no AWS API, so no
credentials or network are needed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sluice.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
HANDLER_FILE = ROOT / "bench" / "results" / "handler-rss.json"
HANDLERS = ("fetcher", "scheduler", "finalizer")

_CHILD = """
import importlib, json, resource, sys
importlib.import_module("sluice.handlers." + sys.argv[1])
from sluice.handlers.bootstrap import services
services()
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
"""


def _environment() -> dict[str, str]:
    """A deployed function's settings (made-up names; nothing is called), every optional part on."""
    settings = Settings(
        ledger_table="ledger",
        records_table="records",
        bucket="bucket",
        queue_url="https://sqs.us-east-1.amazonaws.com/000000000000/urls.fifo",
        finalize_queue_url="https://sqs.us-east-1.amazonaws.com/000000000000/finalize",
        specs_dir=Path("specs"),
        finalizer_function="finalizer",
        scheduler_function="scheduler",
        workgroup="sluice",
        glue_database="sluice",
    )
    fake = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "measure", "AWS_SECRET_ACCESS_KEY": "measure"}
    return {**os.environ, **settings.to_env(), **fake}


def peak_rss_mb(handler: str) -> float:
    """One fresh interpreter's peak RSS (``ru_maxrss``) after importing ``handler`` and building its services."""
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", _CHILD, handler], env=_environment(), capture_output=True, text=True, check=True
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(rounds: int = 3) -> dict[str, Any]:
    """Each handler's median over ``rounds`` fresh processes (interleaved, so load falls on all alike)."""
    runs: dict[str, list[float]] = {name: [] for name in HANDLERS}
    for _ in range(rounds):
        for name in HANDLERS:
            runs[name].append(peak_rss_mb(name))
    return {
        "command": "python -m sluice_tools.scale.handler_memory",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "python": sys.version.split()[0],
        "rounds": rounds,
        "peak_rss_mb": {name: round(statistics.median(values), 1) for name, values in runs.items()},
        "range_mb": {name: [round(min(values), 1), round(max(values), 1)] for name, values in runs.items()},
    }


if __name__ == "__main__":
    result = measure()
    HANDLER_FILE.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))

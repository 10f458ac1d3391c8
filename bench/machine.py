"""A description of the machine and software a benchmark ran on."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

PACKAGES = (
    "httpx",
    "httpcore",
    "httpx-aiohttp",
    "aiohttp",
    "selectolax",
    "w3lib",
    "pydantic",
    "Scrapy",
    "Twisted",
    "parsel",
    "beautifulsoup4",
    "lxml",
    "psutil",
)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str]:
    """Installed versions of the packages the benchmark exercises."""
    found: dict[str, str] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def git_commit() -> str:
    """HEAD of the repository, with ``+dirty`` when the work tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def describe() -> dict[str, Any]:
    """Machine, OS, Python and package facts, as stored in every result file."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "packages": versions(),
        "commit": git_commit(),
    }

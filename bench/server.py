"""Harness side of the benchmark server: start it, watch its CPU, stop it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import TracebackType

import psutil  # type: ignore[import-untyped]

STARTUP_TIMEOUT_S = 180.0


@dataclass
class ServerProcess:
    """``with ServerProcess(books=..., prerender=...) as server:`` gives ``server.base``."""

    books: int
    prerender: int
    latency_ms: float
    heavy: bool = False
    base: str = ""
    prerender_s: float = 0.0
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    def __enter__(self) -> ServerProcess:
        command = [
            sys.executable,
            "-m",
            "bench.serve",
            "--books",
            str(self.books),
            "--prerender",
            str(self.prerender),
            "--latency-ms",
            str(self.latency_ms),
        ]
        if self.heavy:
            command.append("--heavy")
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self._proc.stdout.readline()
            if not line:
                raise RuntimeError(f"benchmark server exited with {self._proc.wait()} before it was ready")
            if line.startswith("READY "):
                _, self.base, rendered = line.split()
                self.prerender_s = float(rendered)
                return self
        self.__exit__(None, None, None)
        raise RuntimeError("benchmark server was not ready in time")

    def cpu_s(self) -> float:
        """CPU seconds the server process has used so far (user + system)."""
        assert self._proc is not None
        times = psutil.Process(self._proc.pid).cpu_times()
        return float(times.user + times.system)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if self._proc is None:
            return
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=15)
        self._proc = None

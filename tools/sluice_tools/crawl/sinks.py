"""Local record sinks: JSON Lines appended page by page, so a crash loses at most one page."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from sluice.extraction.extract import Record, record_line


class JsonlSink:
    """Appends records to a JSON Lines file and flushes after every page."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.written = 0
        self._handle: TextIO | None = None

    def write(self, records: Sequence[Record]) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("w", encoding="utf-8")
        self._handle.writelines(record_line(r) for r in records)
        self._handle.flush()
        self.written += len(records)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Objects as files under the state folder, at the same keys S3 would hold them.

Every object appears whole or not at all: written to a temporary file beside it, flushed to
disk, then renamed into place, so a run killed mid-write never leaves a torn part or output.
A finalizing attempt's own scratch (:func:`~sluice.domain.layout.is_attempt_scratch`) is renamed into
place the same way but not flushed to disk: only that attempt reads it, in the process that wrote it,
and a finalize that starts again (after a crash or a power cut) starts an attempt of its own. Its nine
files of a one-shard run were 18 of a local finalize's 28 fsyncs, its largest fixed cost.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import BinaryIO

from sluice.adapters.local.errors import local_errors
from sluice.domain.layout import is_attempt_scratch


@local_errors
class FileObjects:
    """:class:`sluice.ports.ObjectStore` on a folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"object key {key!r} leaves the state folder")
        return path

    def put(self, key: str, body: bytes, content_type: str) -> None:
        writer = self.writer(key, content_type)
        writer.write(body)
        writer.close()

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def put_new(self, key: str, body: bytes, content_type: str) -> bool:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with path.open("xb") as handle:  # O_EXCL: one writer wins, as S3's If-None-Match does
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
        except FileExistsError:
            return False
        return True

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def size(self, key: str) -> int | None:
        try:
            return self.path(key).stat().st_size
        except FileNotFoundError:
            return None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        with self.path(key).open("rb") as handle:
            handle.seek(start)
            return handle.read(length)

    def writer(self, key: str, content_type: str) -> FileWriter:
        return FileWriter(self.path(key), durable=not is_attempt_scratch(key))

    def location(self, key: str) -> str:
        return str(self.root / key)


@local_errors
class FileWriter:
    """Writes to ``NAME.tmp-UUID``; :meth:`close` makes it durable (unless not ``durable``) and renames it
    to ``NAME``."""

    def __init__(self, target: Path, *, durable: bool = True) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self._target = target
        self._durable = durable
        self._tmp = target.with_name(f"{target.name}.tmp-{uuid.uuid4().hex[:8]}")
        self._handle: BinaryIO = self._tmp.open("wb")
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        self._handle.write(data)
        self._size += len(data)

    def close(self) -> None:
        self._handle.flush()
        if self._durable:
            os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self._tmp, self._target)
        if not self._durable:
            return
        folder = os.open(self._target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)  # the rename itself, so the object survives a power cut too
        finally:
            os.close(folder)

    def abort(self) -> None:
        self._handle.close()
        self._tmp.unlink(missing_ok=True)

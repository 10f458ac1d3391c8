"""SQLite's and the file system's errors as the domain's store errors (:mod:`sluice.domain.errors`).

Every local adapter class is wrapped with :data:`local_errors`, so a step sees the same kinds of failure
from the state folder as from AWS: a database that stayed locked past its busy timeout is throttled, a
read-only file denied, a file that is not there missing, a uniqueness the store enforces a conflict.
"""

from __future__ import annotations

import sqlite3

from sluice.adapters.boundary import store_errors
from sluice.domain.errors import Conflict, Denied, Missing, StoreError, Throttled


def translate(exc: BaseException, where: str) -> StoreError | None:
    """The store error a ``sqlite3`` or ``OSError`` raised in ``where`` means; None for anything else."""
    what = f"{where}: {type(exc).__name__}: {exc}"
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            return Throttled(f"{what} (another process held the state folder's database past the busy timeout)")
        if "readonly" in text or "read-only" in text:
            return Denied(what)
        return StoreError(what)
    if isinstance(exc, sqlite3.IntegrityError):
        return Conflict(what)
    if isinstance(exc, sqlite3.Error):
        return StoreError(what)
    if isinstance(exc, FileNotFoundError):
        return Missing(what)
    if isinstance(exc, PermissionError):
        return Denied(what)
    if isinstance(exc, FileExistsError):
        return Conflict(what)
    if isinstance(exc, OSError):
        return StoreError(what)
    return None


local_errors = store_errors(translate)
"""Wrap a local adapter class: its public methods raise the domain's store errors, never sqlite3's or OSError."""

"""The Parquet copy's record: the run's ``parquet.json`` beside its summary, what was started and how it stands.

Written by the copy's start and by each sweep that reads its queries back (``sluice.pipeline.finalize.columnar``);
read by ``sluice show`` (:func:`describe`) without the Athena side.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

from sluice.domain.layout import run_prefix

CopyStatus = Literal["RUNNING", "SUCCEEDED", "FAILED", "NOT_STARTED"]


class CopyStore(Protocol):
    """Where the copy's record is kept (the run's folder in the bucket)."""

    def put(self, key: str, body: bytes, content_type: str) -> None: ...

    def get(self, key: str) -> bytes | None: ...


@dataclass(slots=True)
class CopiedTable:
    kind: str | None
    table: str
    location: str
    query_id: str | None = None
    state: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class CopyState:
    """The run's ``parquet.json``: what was started, in which generation, and how it stands."""

    crawl: str
    run_id: str
    generation: str
    status: CopyStatus
    started_at: str
    checked_at: str | None = None
    reason: str | None = None
    tables: list[CopiedTable] = field(default_factory=list)

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes) -> CopyState:
        data = json.loads(raw)
        tables = [CopiedTable(**t) for t in data.pop("tables")]
        return cls(**data, tables=tables)


def copy_state_key(crawl: str, run_id: str) -> str:
    """Beside the run's summary, not in ``parquet/`` (every object there is read as Parquet)."""
    return f"{run_prefix(crawl, run_id)}parquet.json"


def read_state(objects: CopyStore, crawl: str, run_id: str) -> CopyState | None:
    raw = objects.get(copy_state_key(crawl, run_id))
    return CopyState.from_json(raw) if raw is not None else None


def describe(state: CopyState | None, location: str) -> str:
    """How a run's Parquet copy stands, for a person (``sluice show``)."""
    if state is None:
        return "none recorded: the sweep starts a missing copy within the hour (docs/querying.md)"
    queries = ", ".join(t.query_id or "not started" for t in state.tables)
    if state.status == "SUCCEEDED":
        return f"{location} (Athena UNLOAD {queries}, succeeded)"
    if state.status == "RUNNING":
        return f"{location} (Athena UNLOAD {queries}, started {state.started_at}; the sweep records how it ends)"
    return f"NOT WRITTEN: {state.reason} (the JSON Lines records are the run's output)"

"""A finalizing attempt's scratch on the local store: renamed into place whole, not flushed to disk.

Only the attempt that wrote it reads it, in the same process, and a finalize that starts again starts an
attempt (a folder) of its own, so flushing it bought nothing a crash or power cut could use; the run's parts,
its output and the attempts list stay flushed, file and folder, as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluice.adapters.local.objects import FileObjects
from sluice.domain.layout import (
    finalize_prefix,
    index_key,
    is_attempt_scratch,
    manifest_key,
    part_key,
    records_file,
    summary_key,
    work_prefix,
)

CRAWL, RUN = "books", "20261203T000000Z-abcdef"
SCRATCH = [f"{finalize_prefix(CRAWL, RUN, '1796315248-6a6564')}{name}" for name in ("scan-00000.bin", "plan.index")]
KEPT = [
    part_key(CRAWL, RUN, "p1"),
    f"{work_prefix(CRAWL, RUN)}finalize/attempts.json",
    records_file(CRAWL, RUN, 0),
    index_key(CRAWL, RUN),
    manifest_key(CRAWL, RUN),
    summary_key(CRAWL, RUN),
]


def test_only_keys_under_an_attempts_folder_are_scratch() -> None:
    assert all(is_attempt_scratch(k) for k in SCRATCH)
    assert not any(is_attempt_scratch(k) for k in KEPT)
    assert not is_attempt_scratch(f"runs/crawl={CRAWL}/run={RUN}/finalize/x/y")


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


@pytest.mark.parametrize("key", SCRATCH)
def test_scratch_is_written_whole_without_a_flush(tmp_path: Path, fsyncs: list[int], key: str) -> None:
    store = FileObjects(tmp_path)
    writer = store.writer(key, "application/octet-stream")
    writer.write(b"half ")
    assert store.get(key) is None  # not in place before it is whole
    writer.write(b"whole")
    writer.close()
    store.put(key, b"again", "application/octet-stream")
    assert store.get(key) == b"again"
    assert fsyncs == []
    assert [p.name for p in store.path(key).parent.iterdir()] == [store.path(key).name]  # no temporary left


@pytest.mark.parametrize("key", KEPT)
def test_parts_output_and_attempts_are_flushed_file_and_folder(tmp_path: Path, fsyncs: list[int], key: str) -> None:
    store = FileObjects(tmp_path)
    store.put(key, b"kept", "application/octet-stream")
    assert store.get(key) == b"kept"
    assert len(fsyncs) == 2

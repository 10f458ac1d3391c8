"""A record's output line: the bytes ``json.dumps`` writes for it, by an encoder built once, not one per record."""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

import pytest

from sluice.extraction.extract import Record, record_line

DATA: list[dict[str, Any]] = [
    {},
    {"title": "Café", "price": 51.77, "stock": None, "new": True},
    {"title": '東京 — ünïcödé \u2028 \x00 "quoted" \\ back', "emoji": "🐍", "tab": "a\tb\nc"},
    {"floats": [0.1, 1e16, -0.0, float("nan"), float("inf")], "ints": [0, -1, 2**63]},
    {"nested": {"z": [1, {"b": 2, "a": [None, {"y": "x"}]}]}, "Z": 1, "a": 2},
]


def records() -> list[Record]:
    return [
        Record(
            key=f"k{i}", data=data, page_url="https://books.example/p/1", position=i, type=("book" if i % 2 else None)
        )
        for i, data in enumerate(DATA)
    ]


def reference(record: Record) -> str:
    payload: dict[str, Any] = {"_key": record.key, "_page": record.page_url}
    if record.type is not None:
        payload["_type"] = record.type
    return json.dumps(payload | record.data, ensure_ascii=False) + "\n"


def test_a_records_line_is_what_json_dumps_writes() -> None:
    for record in records():
        line = record_line(record)
        assert line == reference(record)
        assert line.count("\n") == 1
        assert json.loads(line)["_key"] == record.key


def test_a_line_that_cannot_be_written_leaves_the_next_unchanged() -> None:
    with pytest.raises(TypeError):
        record_line(Record(key="x", data={"when": object()}, page_url="https://books.example/", position=0))
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular reference"):
        record_line(Record(key="x", data={"c": circular}, page_url="https://books.example/", position=0))
    assert [record_line(r) for r in records()] == [reference(r) for r in records()]


def test_a_records_line_builds_no_encoder(encoders_built: Callable[[], int]) -> None:
    for record in records():
        record_line(record)
    assert encoders_built() == 0

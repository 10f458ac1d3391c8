"""A record's content hash: the value every earlier run stored, written by an encoder built once, not per record."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import json.encoder
from collections.abc import Callable
from typing import Any

import pytest

from sluice.extraction.extract import content_hash

RECORDS: list[dict[str, Any]] = [
    {},
    {"title": "Café", "price": 51.77},
    {"price": 51.77, "title": "Café"},  # the same record, keys in another order
    {"title": '東京 — ünïcödé \u2028 \x00 "quoted" \\ back', "emoji": "🐍", "tab": "a\tb\nc"},
    {"lone": "\ud800 surrogate"},  # lxml never makes one, a JSON-LD escape can: hashed through surrogatepass
    {"floats": [0.1, 1e16, 1e-7, -0.0, 3.0, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf")]},
    {"ints": [0, -1, 2**63, 10**30], "bools": [True, False], "none": None},
    {"nested": {"z": [1, {"b": 2, "a": [None, {"y": "x"}]}], "a": {"k": "v"}}, "list": [[[]], {}]},
    {"when": datetime.date(2026, 12, 3), "amount": decimal.Decimal("1.10")},  # not JSON: written as str()
    {"Z": 1, "a": 2, "_": 3, "é": 4, "10": 5, "9": 6},
]


def reference(data: dict[str, Any]) -> str:
    """The content hash as it was first defined: ``json.dumps`` with these options, one encoder per call."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@pytest.mark.parametrize("data", RECORDS, ids=range(len(RECORDS)))
def test_the_content_hash_is_the_one_json_dumps_gives(data: dict[str, Any]) -> None:
    assert content_hash(data) == reference(data)


def test_the_content_hash_keeps_the_values_earlier_runs_stored() -> None:
    assert content_hash({"title": "Café", "price": 51.77}) == "7602991ae103d46d5610e0aa2165b9d0"
    assert content_hash(RECORDS[7]) == "295d4326667829c0a93e7fbd74a67dfd"


def test_a_failed_hash_leaves_the_next_one_unchanged() -> None:
    circular: dict[str, Any] = {"a": [1]}
    circular["a"].append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        content_hash(circular)
    with pytest.raises(TypeError):
        content_hash({"mixed": {1: "x", "a": "y"}})  # keys that cannot be sorted, as json.dumps refuses them
    for data in RECORDS:
        assert content_hash(data) == reference(data)


def test_a_record_s_hash_builds_no_encoder(encoders_built: Callable[[], int]) -> None:
    """``JSONEncoder.encode`` builds a C encoder per call (1.2 of a record's 5 µs): the hash keeps one."""
    for data in RECORDS:
        content_hash(data)
    assert encoders_built() == 0

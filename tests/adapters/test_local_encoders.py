"""The local frontier and records table write their JSON as ``json.dumps`` does, with encoders built once."""

from __future__ import annotations

import base64
import json
import json.encoder
from pathlib import Path
from typing import Any

import pytest

from sluice.adapters.aws import codec
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.records import SqliteRecords
from sluice.adapters.local.store import Database
from sluice.domain.pages import PageResult, RecordCounts, url_hash
from sluice.extraction.extract import Record
from sluice.jsontext import json_text
from sluice.messages import UrlTask

RUN = "r1"
RESULTS = [
    PageResult(
        url="https://books.example/café/1.html",
        depth=1,
        origin="link",
        outcome="fetched",
        status=200,
        etag='W/"x\u2028"',
        counts=RecordCounts(2, 1, 0),
        digests=bytes(range(48)),
        carry={"price": 9.99, "name": "東京"},
        parent="0123456789abcdef",
        carried_by_link={"fedcba9876543210": {"price": 1.5, "in_stock": True}},
        fetched_at=1_800_000_000,
    ),
    PageResult(url="https://books.example/2.html", depth=0, origin="seed", outcome="failed", status=404, reason="gone"),
]
TASKS = [
    UrlTask(url="https://books.example/a.html", depth=1, origin="link", parent="0123456789abcdef", via="books"),
    UrlTask(url="https://books.example/b.html", depth=2, origin="link", carry={"p": "ü", "n": 3, "x": None}),
    UrlTask(url="https://books.example/c.html", depth=1, origin="link"),
]
RECORDS = [
    Record("k1", {"title": "Café", "price": 51.77, "z": [1, {"b": 2, "a": 1}]}, "https://books.example/1.html", 0),
    Record("k2", {"b": None, "a": "ünï \u2028", "c": 1e16}, "https://books.example/1.html", 1, type="book"),
]


@pytest.fixture
def encoders_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many C encoders ``json`` builds (``json.dumps`` with options and ``JSONEncoder.encode`` build one a call)."""
    built = [0]
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    assert make is not None

    def counting(*args: Any) -> Any:
        built[0] += 1
        return make(*args)

    monkeypatch.setattr(json.encoder, "c_make_encoder", counting)
    return built


def test_the_frontier_writes_results_and_links_as_before_with_no_encoder_built(
    tmp_path: Path, encoders_built: list[int]
) -> None:
    db = Database(tmp_path)
    frontier = SqliteFrontier(db)
    frontier.claim(RUN, TASKS, seeds=0, max_pages=100)
    assert frontier.complete(RUN, RESULTS) == [True, True]
    assert encoders_built == [0]
    with db.reading() as conn:
        results = dict(conn.execute("SELECT url_hash, result FROM urls WHERE result IS NOT NULL").fetchall())
        links = dict(
            conn.execute("SELECT url_hash, link FROM urls WHERE origin = 'link' AND result IS NULL").fetchall()
        )
    for result in RESULTS:
        plain = codec.result_plain(result)
        if codec.DIGESTS in plain:
            plain[codec.DIGESTS] = base64.b64encode(plain[codec.DIGESTS]).decode()
        assert results[url_hash(result.url)] == json.dumps(plain, separators=(",", ":"))
    for task in TASKS:
        link = codec.link_plain(task)
        assert links[url_hash(task.url)] == (json.dumps(link, separators=(",", ":")) if link else None)
    assert [frontier.entries(RUN, [url_hash(r.url)])[url_hash(r.url)].result for r in RESULTS] == RESULTS


def test_the_records_table_writes_data_as_before_with_no_encoder_built(
    tmp_path: Path, encoders_built: list[int]
) -> None:
    table = SqliteRecords(Database(tmp_path))
    table.upsert("books", RUN, RECORDS)
    assert encoders_built == [0]
    for record in RECORDS:
        found = table.get("books", record.key, record.type)
        assert found is not None
        assert found["data"] == json.dumps(record.data, ensure_ascii=False, sort_keys=True)
        assert found["content_hash"] == record.content_hash


VALUES: list[Any] = [
    "top-level string é \ud800",
    12,
    -0.0,
    None,
    [1, "ü", [{}], float("nan"), float("-inf")],
    {"b": 1, "a": {"d": [True, None], "c": "東京"}, "": 0.1},
]
OPTIONS: list[dict[str, Any]] = [
    {},
    {"separators": (",", ":")},
    {"ensure_ascii": False, "sort_keys": True},
    {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "default": str},
]


@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_json_text_writes_what_json_dumps_writes(options: dict[str, Any]) -> None:
    text = json_text(**options)
    for value in VALUES:
        assert text(value) == json.dumps(value, **options)
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        text({"a": loop})
    with pytest.raises(TypeError):
        text({"x": object()} if "default" not in options else {1: 2, "a": 3})
    for value in VALUES:  # a write that failed midway leaves the next ones as they were
        assert text(value) == json.dumps(value, **options)

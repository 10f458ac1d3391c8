"""The item codec writes what the ledger always held, and reads items the code before it wrote.

Stored items outlive a deploy (a run's URL items are the next run's catalog for 15 days), so the
attribute names are a format: spelled out here, not taken from the codec, and an item and a SQLite
row written by the code before the codec are read back as the result they were written from.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.domain.full_result import every_field

from sluice.adapters.aws import clients, codec
from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.items import to_item
from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.store import Database
from sluice.domain.pages import PageResult, UrlEntry, url_hash
from sluice.messages import UrlTask
from sluice_tools.meter.dynamo_size import item_size

from .conftest import moto_ledger

TABLE = "sluice-test-ledger"
RUN = "20261201T000000Z-abcdef"
FULL = every_field()
"""A result with every field set, so every attribute is written."""
FULL_HASH = "aeb47c4dd96063646ff3eeb3806bde7d8f10b491"

OLD_ITEM: dict[str, Any] = {
    "pk": {"S": "url#20261201T000000Z-abcdef#a"},
    "sk": {"S": FULL_HASH},
    "u": {"S": "https://books.example/a.html"},
    "d": {"N": "2"},
    "g": {"S": "l"},
    "o": {"S": "f"},
    "r": {"S": "r"},
    "h": {"N": "200"},
    "e": {"S": '"e1"'},
    "l": {"S": "Sun, 29 Nov 2026 21:00:00 GMT"},
    "b": {"S": "0123abcd"},
    "k": {"B": bytes(range(16))},
    "m": {"M": {"price": {"N": "1"}}},
    "j": {"M": {"name": {"N": "2"}}},
    "c": {"L": [{"N": "3"}, {"N": "2"}, {"N": "1"}, {"N": "7"}]},
    "w": {"L": [{"S": "p1"}, {"N": "10"}, {"N": "20"}]},
    "y": {"BOOL": True},
    "ms": {"N": "312"},
    "z": {"N": "1"},
    "fk": {"N": "2"},
    "cp": {"N": "3"},
    "bd": {"N": "4"},
    "ft": {"N": "1796000000"},
    "ty": {"S": "book"},
    "v": {"S": "books"},
    "ca": {"M": {"price": {"S": "9.99"}}},
    "p": {"S": "0123456789abcdef"},
    "kc": {"M": {"fedcba9876543210": {"M": {"price": {"S": "1"}}}}},
    "kw": {"L": [{"S": "p2"}, {"N": "5"}, {"N": "6"}]},
    "cs": {"BOOL": True},
    "cd": {"M": {"blurb": {"N": "3"}}},
    "iv": {"N": "86400"},
    "a": {"S": "20261201T000000Z-abcdef/f1/0/99"},
    "px": {"L": [{"S": "eu"}, {"N": "1"}]},
    "pf": {"L": [{"L": [{"S": "us"}, {"S": "timeout"}, {"N": "1"}]}]},
    "s": {"S": "d"},
    "t": {"N": "1800000000"},
}
"""``FULL``'s URL item as the code before the codec wrote it (``PageResult.to_plain`` and the frontier's own)."""
OLD_ROW = (
    '{"u":"https://books.example/a.html","d":2,"g":"l","o":"f","r":"r","h":200,"e":"\\"e1\\"",'
    '"l":"Sun, 29 Nov 2026 21:00:00 GMT","b":"0123abcd","k":"AAECAwQFBgcICQoLDA0ODw==","m":{"price":1},'
    '"j":{"name":2},"c":[3,2,1,7],"w":["p1",10,20],"y":true,"ms":312,"z":1,"fk":2,"cp":3,"bd":4,"ft":1796000000,'
    '"ty":"book","v":"books","ca":{"price":"9.99"},"p":"0123456789abcdef","kc":{"fedcba9876543210":{"price":"1"}},'
    '"kw":["p2",5,6],"cs":true,"cd":{"blurb":3},"iv":86400,"a":"20261201T000000Z-abcdef/f1/0/99","px":["eu",1],'
    '"pf":[["us","timeout",1]]}'
)
"""``FULL`` as the SQLite store's ``result`` column held it before the codec."""
RESULT_ATTRIBUTES = {
    "u", "d", "g", "o", "r", "h", "e", "l", "b", "k", "m", "j", "c", "w", "y", "ms", "z", "fk", "cp", "bd", "ft",
    "ty", "v", "ca", "p", "kc", "kw", "cs", "cd", "iv", "a", "px", "pf",
}  # fmt: skip


@pytest.fixture
def dynamo(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with moto_ledger(monkeypatch, TABLE):
        yield clients.client("dynamodb")


def test_a_result_item_holds_exactly_these_attributes_and_the_expiry_is_t() -> None:
    item = codec.result_item(RUN, FULL_HASH, FULL, 1_800_000_000)
    assert set(item) == {"pk", "sk", "s", "t"} | RESULT_ATTRIBUTES
    assert codec.EXPIRES == "t"
    assert set(codec.RESULT_NAMES) == RESULT_ATTRIBUTES
    assert not codec.URL_ITEM_NAMES & set(codec.RESULT_NAMES)  # a result's code never overwrites its item's own


def test_the_codec_writes_a_result_as_the_code_before_it_did() -> None:
    assert to_item(codec.result_item(RUN, FULL_HASH, FULL, 1_800_000_000)) == OLD_ITEM


def test_dynamodb_holds_a_written_result_under_the_spelled_names_and_reads_an_old_one_back(dynamo: Any) -> None:
    frontier = DynamoFrontier(TABLE, ttl_days=15, writers=2)
    assert frontier.complete(RUN, [FULL]) == [True]
    stored = dynamo.get_item(TableName=TABLE, Key={"pk": OLD_ITEM["pk"], "sk": OLD_ITEM["sk"]})["Item"]
    assert set(stored) == {"pk", "sk", "s", "t"} | RESULT_ATTRIBUTES
    assert {k: v for k, v in stored.items() if k != "t"} == {k: v for k, v in OLD_ITEM.items() if k != "t"}

    dynamo.put_item(TableName=TABLE, Item=OLD_ITEM)
    assert frontier.entries(RUN, [FULL_HASH])[FULL_HASH].result == FULL


def test_dynamodb_reads_a_claim_the_code_before_the_codec_wrote(dynamo: Any) -> None:
    claim_hash = "fd9f6ebead52e12a05f62d7b2dac06d26cfbbe05"
    dynamo.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "url#20261201T000000Z-abcdef#f"},
            "sk": {"S": claim_hash},
            "u": {"S": "https://books.example/b.html"},
            "d": {"N": "1"},
            "g": {"S": "l"},
            "s": {"S": "q"},
            "t": {"N": "1800000000"},
            "p": {"S": "0123456789abcdef"},
            "v": {"S": "books"},
            "ca": {"M": {"price": {"S": "9.99"}}},
        },
    )
    [entry] = DynamoFrontier(TABLE, ttl_days=15, writers=2).scan(RUN)
    assert entry == UrlEntry(
        claim_hash, "https://books.example/b.html", 1, "link", "0123456789abcdef", None, "books", {"price": "9.99"}
    )


def test_sqlite_reads_a_result_row_the_code_before_the_codec_wrote(tmp_path: Path) -> None:
    db = Database(tmp_path)
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO urls (run_id, url_hash, url, depth, origin, parent, done, outcome, records, result) "
            "VALUES (?, ?, ?, 2, 'link', ?, 1, 'fetched', 6, ?)",
            (RUN, FULL_HASH, FULL.url, FULL.parent, OLD_ROW),
        )
    frontier = SqliteFrontier(db)
    assert frontier.entries(RUN, [FULL_HASH])[FULL_HASH].result == FULL
    frontier.replace(RUN, [FULL])
    with db.reading() as conn:
        (row,) = conn.execute("SELECT result FROM urls WHERE url_hash = ?", (FULL_HASH,)).fetchone()
    assert json.loads(row) == json.loads(OLD_ROW)


def test_a_claim_round_trips_through_its_item() -> None:
    task = UrlTask(url="https://books.example/b.html", depth=1, origin="link", parent="0123456789abcdef", via="books")
    item = codec.claim_item(RUN, url_hash(task.url), task, 1_800_000_000)
    assert set(item) == {"pk", "sk", "u", "d", "g", "s", "t", "p", "v"}
    entry = codec.url_entry(item)
    assert (entry.url, entry.depth, entry.origin, entry.parent, entry.via, entry.result) == (
        task.url,
        1,
        "link",
        task.parent,
        "books",
        None,
    )


def test_a_url_item_is_sized_as_dynamodb_counts_it() -> None:
    result = PageResult(url="https://b.example/", depth=0, origin="seed", outcome="failed", status=404)
    entry = UrlEntry(url_hash(result.url), result.url, 0, "seed", None, result)
    # pk "url#RUN#5" 2+29, sk 2+40, u 1+18, d 1+1 (zero), g 1+1, o 1+1, h 1+3 (404), s 1+1, t 1+6 (ten digits)
    assert codec.stored_bytes(RUN, entry) == 31 + 42 + 19 + 2 + 2 + 2 + 4 + 2 + 7
    assert codec.stored_bytes(RUN, entry) == item_size(
        to_item(codec.result_item(RUN, entry.url_hash, result, 1_799_999_999))
    )
    claim = UrlEntry(url_hash(FULL.url), FULL.url, 2, "link", "0123456789abcdef", None, "books", {"price": "9.99"})
    stored = to_item(
        codec.claim_item(RUN, claim.url_hash, UrlTask(url=FULL.url, depth=2, origin="link"), 1_799_999_999)
    )
    # the claim's link besides: p 1+16, v 1+5, ca 2+(3 + 1 + 5 + 4)
    assert codec.stored_bytes(RUN, claim) == item_size(stored) + 17 + 6 + 15


def test_the_local_adapter_imports_nothing_of_botocore() -> None:
    """The codec is shared with the local store, which runs where botocore need not be installed."""
    functions = Path(__file__).resolve().parents[2] / "functions"
    todo = sorted((functions / "sluice/adapters/local").glob("*.py"))
    seen: set[Path] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for node in ast.walk(ast.parse(module.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                assert not name.startswith(("botocore", "boto3")), f"{module.name} imports {name}"
                path = functions / (name.replace(".", "/") + ".py")
                if name.startswith("sluice.adapters.aws") and path.exists():
                    todo.append(path)
    assert functions / "sluice/adapters/aws/codec.py" in seen


def test_dynamodb_sizes_and_gives_digests_as_its_scan_reads_them(dynamo: Any) -> None:
    """The finalizer's two reads (``scan_sized``, ``held_digests``) are the scan's queries, what it reads unchanged."""
    frontier = DynamoFrontier(TABLE, ttl_days=15, writers=2)
    failed = PageResult(url="https://b.example/", depth=0, origin="seed", outcome="failed", status=404)
    frontier.complete(RUN, [FULL, failed])
    entries = list(frontier.scan(RUN))
    assert list(frontier.scan_sized(RUN)) == [(e, codec.stored_bytes(RUN, e)) for e in entries]
    assert list(frontier.held_digests(RUN)) == [FULL.digests]

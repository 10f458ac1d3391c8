"""A stored result read back, and an item sized, by the quicker paths the finalizer's scan takes (one a URL).

``codec.result_from_plain`` builds its result by slot (``pages.result_of_values``) and ``sizes.item_bytes`` sizes
strings, ints, bytes and lists in its own loop. Each is checked here against the code it replaced, kept below:
the same result (every field, field by field) and the same size, for results and items of every shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from decimal import Decimal
from typing import Any

import pytest

from sluice.adapters.aws import codec
from sluice.adapters.aws.items import from_item, to_item
from sluice.adapters.aws.sizes import item_bytes, value_bytes
from sluice.domain.pages import ArchiveRef, PageResult, PartBlock, RecordCounts, result_of_values

from .test_item_codec import FULL, OLD_ROW, RUN

# -- the code replaced, kept as the reference ------------------------------------------------------------------


def _counts(value: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: int(v) for k, v in (value or {}).items()}


def _block(value: Any) -> PartBlock | None:
    return PartBlock(str(value[0]), int(value[1]), int(value[2])) if value else None


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def reference_result(plain: Mapping[str, Any]) -> PageResult:
    """``codec.result_from_plain`` as it was: every field by name through ``PageResult.__init__``."""
    new, changed, unchanged, items = (int(n) for n in plain.get("c", (0, 0, 0, 0)))
    proxy = plain.get("px")
    outcomes = {"f": "fetched", "n": "not_modified", "d": "not_due", "e": "failed", "k": "skipped"}
    return PageResult(
        url=plain["u"],
        depth=int(plain["d"]),
        origin="seed" if plain["g"] == "s" else "link",
        outcome=outcomes[plain["o"]],  # type: ignore[arg-type]
        reason=plain.get("r"),
        status=_int_or_none(plain.get("h")),
        etag=plain.get("e"),
        last_modified=plain.get("l"),
        body_hash=plain.get("b"),
        counts=RecordCounts(new, changed, unchanged),
        items=items,
        missing=_counts(plain.get("m")),
        rejected=_counts(plain.get("j")),
        digests=bytes(plain.get("k") or b""),
        block=_block(plain.get("w")),
        reused=bool(plain.get("y", False)),
        ms=int(plain.get("ms", 0)),
        dropped_links=int(plain.get("z", 0)),
        fallback_keys=int(plain.get("fk", 0)),
        capped_links=int(plain.get("cp", 0)),
        beyond_depth=int(plain.get("bd", 0)),
        fetched_at=_int_or_none(plain.get("ft")),
        type=plain.get("ty"),
        via=plain.get("v"),
        carry=plain.get("ca") or None,
        parent=plain.get("p"),
        carried_by_link=plain.get("kc") or None,
        carried_block=_block(plain.get("kw")),
        carry_stale=bool(plain.get("cs", False)),
        carry_dropped=_counts(plain.get("cd")),
        interval=_int_or_none(plain.get("iv")),
        archive=ArchiveRef.from_text(plain["a"]) if plain.get("a") else None,
        proxy=str(proxy[0]) if proxy else None,
        proxy_tier=int(proxy[1]) if proxy and proxy[1] is not None else None,
        proxy_failures=tuple((str(n), str(r), bool(int(e))) for n, r, e in plain.get("pf") or ()),
    )


def reference_item_bytes(item: Mapping[str, Any]) -> int:
    """``sizes.item_bytes`` as it was: each name encoded, each value sized by ``value_bytes``."""
    return sum(len(name.encode()) + reference_value_bytes(value) for name, value in item.items())


def reference_value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if type(value) is int:
        return (len(str(abs(value)).strip("0")) + 1) // 2 + 1
    if isinstance(value, list | tuple):
        return 3 + sum(1 + reference_value_bytes(v) for v in value)
    if isinstance(value, Mapping):
        return 3 + sum(1 + len(str(k).encode()) + reference_value_bytes(v) for k, v in value.items())
    return value_bytes(value)  # the other kinds' rules are unchanged


# -- the results and items checked ----------------------------------------------------------------------------

RESULTS = [
    FULL,
    PageResult(url="https://b.example/", depth=0, origin="seed", outcome="failed", status=404, reason="http 404"),
    PageResult(url="https://b.example/s", depth=3, origin="link", outcome="skipped", reason="robots"),
    PageResult(
        url="https://b.example/n", depth=1, origin="link", outcome="not_modified", counts=RecordCounts(0, 0, 5),
        items=5, digests=bytes(range(32)), reused=True, fetched_at=1, interval=0, proxy="p", proxy_tier=None,
    ),
    PageResult(
        url="https://b.example/é", depth=0, origin="seed", outcome="not_due", reason="schedule",
        counts=RecordCounts(0, 0, 0), proxy_failures=(("a", "refused", False), ("b", "timeout", True)),
        carry={"n": 1}, carried_by_link={"00": {"x": [1, 2]}}, carry_dropped={"big": 1}, missing={"é": 2},
    ),
    FULL.but(proxy=None, proxy_tier=None, proxy_failures=(), archive=None, block=None, carried_block=None),
]  # fmt: skip


def _plains() -> list[dict[str, Any]]:
    """Each result as the local store reads it (JSON, digests decoded), and as the DynamoDB store reads it."""
    plains = []
    for result in RESULTS:
        plain = codec.result_plain(result)
        plains.append(plain)
        stored = json.loads(json.dumps({**plain, "k": list(plain.get("k", b""))}))
        stored["k"] = bytes(stored["k"])
        plains.append(stored)
        item = codec.result_item(RUN, "ab" * 20, result, 1_800_000_000)
        plains.append(from_item(to_item(item)))  # numbers as Decimal, digests as bytes, the item's own attributes
    old = json.loads(OLD_ROW)
    old["k"] = bytes(range(16))
    return [*plains, old, {**old, "c": [0, 0, 0, 0]}, {**old, "c": [Decimal(1), Decimal(0), Decimal(0), Decimal(2)]}]


@pytest.mark.parametrize("plain", _plains())
def test_a_result_is_read_back_field_for_field_as_the_code_before_read_it(plain: dict[str, Any]) -> None:
    read, reference = codec.result_from_plain(plain), reference_result(plain)
    for f in fields(PageResult):
        assert getattr(read, f.name) == getattr(reference, f.name), f.name
        assert type(getattr(read, f.name)) is type(getattr(reference, f.name)), f.name
    assert read == reference
    assert read.but(reason="x") == reference.but(reason="x")


def test_results_are_read_back_as_written() -> None:
    for result in RESULTS:
        assert codec.result_from_plain(codec.result_plain(result)) == result


def test_a_result_built_by_slot_is_the_result_built_by_its_init() -> None:
    values = [getattr(FULL, f.name) for f in fields(PageResult)]
    built = result_of_values(values)
    assert built == PageResult(*values)
    assert type(built) is PageResult
    with pytest.raises(ValueError, match="zip"):  # every field given, in order, or none is taken
        result_of_values(values[:-1])
    with pytest.raises(ValueError, match="zip"):
        result_of_values([*values, None])


def test_a_result_has_nothing_its_init_does_that_building_by_slot_would_skip() -> None:
    """``result_of_values`` sets slots and skips ``__init__``: sound only while ``__init__`` does nothing more. A
    ``__post_init__`` (a check, a derived field), an ``InitVar`` or a field left out of ``__init__`` would be
    skipped silently on every read: this fails first."""
    assert "__post_init__" not in vars(PageResult)
    assert all(f.init for f in fields(PageResult))
    assert [f.name for f in fields(PageResult)] == list(PageResult.__match_args__)
    assert set(PageResult.__slots__) == {f.name for f in fields(PageResult)}


def test_a_result_built_by_slot_stays_frozen() -> None:
    built = result_of_values([getattr(FULL, f.name) for f in fields(PageResult)])
    with pytest.raises(AttributeError):
        built.url = "https://other.example/"  # type: ignore[misc]


ITEMS: list[dict[str, Any]] = [
    *(codec.result_plain(r) for r in RESULTS),
    *(from_item(to_item(codec.result_item(RUN, "ab" * 20, r, 1_799_999_999))) for r in RESULTS),
    {"é": "ü", "n": 0, "m": -100, "big": 10**30, "z": 1200, "s": "\ud800x", "b": b"", "ba": bytearray(b"abc")},
    {"l": [1, "a", [2, ["é"]], {"k": None}], "t": ("x", 5), "e": [], "d": {}, "f": 1.5, "dec": Decimal("0.0100")},
    {"set": {"a", "bb"}, "ns": {Decimal(10), Decimal(3)}, "bool": True, "none": None, "x" * 300: "y" * 1000},
]


@pytest.mark.parametrize("item", ITEMS)
def test_an_item_is_sized_as_the_code_before_sized_it(item: dict[str, Any]) -> None:
    assert item_bytes(item) == reference_item_bytes(item)
    for value in item.values():
        assert value_bytes(value) == reference_value_bytes(value)


def test_a_non_ascii_name_or_string_is_sized_by_its_utf8_bytes() -> None:
    assert item_bytes({"é": "ü"}) == 4
    assert item_bytes({"a": "\ud800"}) == 1 + 3  # a lone surrogate: three bytes, as DynamoDB would be sent it
    assert item_bytes({"a": [1, "é"]}) == 1 + 3 + (1 + 2) + (1 + 2)  # a list: 3, each element 1 and its value

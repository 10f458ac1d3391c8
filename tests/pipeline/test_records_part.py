"""A part's body: each page's record lines as one block, byte for byte what ``record_line`` writes."""

from __future__ import annotations

from sluice.domain.pages import PageResult, PartBlock
from sluice.extraction.extract import Record, record_line
from sluice.pipeline.visit.page_results import RecordsPart, unique_records


def records(page: str, n: int, type_: str | None = None) -> list[Record]:
    return [
        Record(f"{page}#{i}", {"title": f"Café {i}", "price": i + 0.5, "tags": ["a", "東京"]}, page, i, type=type_)
        for i in range(n)
    ]


def test_each_pages_lines_are_one_block_of_the_part() -> None:
    part = RecordsPart("crawls/c/runs/r/parts/abc.jsonl")
    first, second = records("https://a.example/1", 3), records("https://a.example/2", 2, "book")
    one = part.add_records(PageResult("https://a.example/1", 0, "seed", "fetched"), first)
    none = part.add_records(PageResult("https://a.example/3", 0, "seed", "fetched"), [])
    two = part.add_records(PageResult("https://a.example/2", 0, "seed", "fetched"), second)

    lines = [record_line(r).encode() for r in first + second]
    assert bytes(part.body) == b"".join(lines)
    assert one.block == PartBlock("abc", 0, sum(map(len, lines[:3])))
    assert none.block is None
    assert two.block == PartBlock("abc", one.block.length, sum(map(len, lines[3:])))
    assert bytes(part.body)[two.block.offset :].decode().count("\n") == 2


def test_unique_records_keeps_each_keys_first_record_in_order() -> None:
    page = records("https://a.example/1", 3)
    assert unique_records(page) == page
    again = Record(page[1].key, {"title": "other"}, page[1].page_url, 9)
    assert unique_records([*page, again, page[0]]) == page
    typed = Record(page[1].key, {"title": "typed"}, page[1].page_url, 9, type="book")
    assert unique_records([*page, typed]) == [*page, typed]  # a key is one within its type

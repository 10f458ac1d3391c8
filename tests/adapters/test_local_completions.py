"""The local frontier counts a chunk of completions in a few statements, each URL once, as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sluice.adapters.local.frontier import SqliteFrontier
from sluice.adapters.local.store import Database
from sluice.domain.pages import PageResult, RecordCounts, url_hash
from sluice.messages import UrlTask

RUN = "r1"
CLAIMER = "fedcba9876543210"


class Counting:
    """A connection that counts the statements its caller hands it (an ``executemany`` is one)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.statements = conn, 0

    def execute(self, *args: Any) -> sqlite3.Cursor:
        self.statements += 1
        return self.conn.execute(*args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        self.statements += 1
        return self.conn.executemany(*args)


def result(n: int, outcome: str = "fetched") -> PageResult:
    return PageResult(
        url=f"https://books.example/{n}.html",
        depth=1,
        origin="link",
        outcome=outcome,  # type: ignore[arg-type]
        counts=RecordCounts(new=n % 3),
        parent="0123456789abcdef",
    )


def test_a_chunk_of_completions_is_a_few_statements_and_counts_each_url_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(tmp_path)
    frontier = SqliteFrontier(db)
    claimed = [UrlTask(url=f"https://books.example/{n}.html", depth=1, origin="link", parent=CLAIMER) for n in range(5)]
    frontier.claim(RUN, claimed, seeds=0, max_pages=1_000)
    assert frontier.complete(RUN, [result(0), result(1)]) == [True, True]

    counting: list[Counting] = []
    real = db.transaction

    @contextmanager
    def counted() -> Iterator[Any]:
        with real() as conn:
            counting.append(Counting(conn))
            yield counting[-1]

    monkeypatch.setattr(db, "transaction", counted)
    # Done before (0, 1), claimed and waiting (2..4), new (5..599), a URL twice in the chunk (7), a failure (8).
    chunk = [result(n) for n in range(600)] + [result(7), result(600, "failed")]
    got = frontier.complete(RUN, chunk)

    assert got == [False, False] + [True] * 598 + [False, True]
    assert sum(c.statements for c in counting) <= 8  # one INSERT a URL made it 600 and more
    progress = frontier.progress(RUN)
    assert progress.done == 2 + 599
    assert progress.failed == 1
    assert progress.records == sum(n % 3 for n in range(601))
    found = frontier.entries(RUN, [url_hash(f"https://books.example/{n}.html") for n in (2, 7, 600)])
    assert found[url_hash("https://books.example/2.html")].parent == CLAIMER  # the claim's parent kept
    assert found[url_hash("https://books.example/7.html")].result == result(7)
    assert found[url_hash("https://books.example/600.html")].result == result(600, "failed")


def test_the_links_a_run_claims_before_its_first_completion_are_counted(tmp_path: Path) -> None:
    """The claim added to the run's counts row with an UPDATE, and the row was made by the first completion: a
    run's first claims (its seed page's links) were never counted, so `sluice show` said "621 of 1901 pages" of
    a run whose URLs were 2,021, and the progress bar's total was short by the same."""
    frontier = SqliteFrontier(Database(tmp_path))
    first = [UrlTask(url=f"https://books.example/{n}.html", depth=1, origin="link", parent=CLAIMER) for n in range(5)]
    assert len(frontier.claim(RUN, first, seeds=1, max_pages=1_000).won) == 5
    assert frontier.progress(RUN).claimed == 5
    frontier.complete(RUN, [result(0)])
    more = [UrlTask(url=f"https://books.example/{n}.html", depth=2, origin="link", parent=CLAIMER) for n in range(3, 9)]
    assert len(frontier.claim(RUN, more, seeds=1, max_pages=1_000).won) == 4
    assert frontier.progress(RUN).claimed == 9

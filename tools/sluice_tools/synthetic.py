"""Synthetic runs written straight into a local store: page results and parts, no crawl, no HTTP.

What the finalizer reads of a run is its URLs' results and the parts they point at, so a run of a
million pages can be made in seconds and finalized as a crawled one would be. Used by
``python -m bench.finalize_scale --synthetic N`` and by the finalizer's tests, which need runs with
every shape the output knows: pages fetched, failed and skipped, record keys two pages share, and a
nightly run that reuses most pages from the first run's output (a 304), changes some and loses
some (404: their records are gone).

Everything is a function of ``pages`` and the page's number, so two stores made alike are alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from sluice.domain.layout import part_key
from sluice.domain.pages import PageResult, PartBlock, RecordCounts, digest
from sluice.ports import Frontier, ObjectStore, RunLedger

CRAWL = "synthetic"
PAGES_PER_PART = 100
"""A fetcher batch's pages: one part per 100 pages, as the stack's batch shape writes them."""
SPEC = """\
name: synthetic
seeds:
  urls: ["https://synthetic.example/page/0"]
extract:
  item: li
  fields:
    title: {selector: "::text"}
  key: [title]
"""


@dataclass(frozen=True, slots=True)
class Shape:
    """How a synthetic run's pages look (every ``n``-th page, by its number)."""

    records: int = 10
    """Records a page holds."""
    failed_every: int = 97
    skipped_every: int = 89
    shared_every: int = 50
    """A page whose first record's key another page (a fifth of the run away) holds too."""
    reused_every: int = 10
    """Nightly: of each ten pages, seven reused (304), two changed, one gone (404)."""


class Stores(Protocol):
    """Where a run lives: a local store, or any pipeline's services (the AWS adapters on moto, in tests)."""

    @property
    def ledger(self) -> RunLedger: ...

    @property
    def frontier(self) -> Frontier: ...

    @property
    def objects(self) -> ObjectStore: ...


def write_spec(specs_dir: Path) -> None:
    specs_dir.mkdir(parents=True, exist_ok=True)
    (specs_dir / f"{CRAWL}.yaml").write_text(SPEC, encoding="utf-8")


def page_url(n: int) -> str:
    return f"https://synthetic.example/page/{n}"


def _key(n: int, i: int, pages: int, shape: Shape) -> str:
    if i == 0 and n % shape.shared_every == 1:
        return f"book-{(n + pages // 5) % pages}-0"  # the same key as another page's first record
    return f"book-{n}-{i}"


def _line(key: str, url: str, night: int, n: int, i: int) -> bytes:
    price = n * 7 + i + (night if (n + i) % 10 in (7, 8) else 0)
    return (json.dumps({"_key": key, "_page": url, "title": f"Title {key}", "price": price}) + "\n").encode()


def _content(line: bytes) -> bytes:
    return digest(hashlib.sha256(line).hexdigest())


def write_run(
    store: Stores, pages: int, *, night: int = 1, catalog_run: str | None = None, shape: Shape = Shape()
) -> str:
    """Open a run of ``pages`` seeds, write every page's result and part, and mark it seeded; its id.

    ``night`` 1 fetches every page; a later night (with ``catalog_run``) reuses, changes and loses pages.
    """
    run = store.ledger.open_run(CRAWL, "synthetic", timedelta(hours=12), trigger=None, catalog_run=catalog_run)
    store.ledger.set_seeds(CRAWL, run.run_id, pages)
    for start in range(0, pages, PAGES_PER_PART):
        numbers = range(start, min(pages, start + PAGES_PER_PART))
        store.frontier.complete(run.run_id, list(_batch(store, run.run_id, numbers, pages, night, shape)))
    store.ledger.seeded(CRAWL, run.run_id)
    return run.run_id


def _batch(store: Stores, run_id: str, numbers: range, pages: int, night: int, shape: Shape) -> Iterator[PageResult]:
    part_id = f"synthetic-{night}-{numbers.start:09d}"
    body = bytearray()
    for n in numbers:
        url = page_url(n)
        if n % shape.failed_every == 3:
            yield PageResult(url, 0, "seed", "failed", reason="HTTP 500", status=500, ms=40)
            continue
        if n % shape.skipped_every == 5:
            yield PageResult(url, 0, "seed", "skipped", reason="robots.txt disallows", ms=0)
            continue
        lines = [_line(_key(n, i, pages, shape), url, night, n, i) for i in range(shape.records)]
        keys = [_key(n, i, pages, shape) for i in range(shape.records)]
        digests = b"".join(digest(k) + _content(line) for k, line in zip(keys, lines, strict=True))
        kind = n % shape.reused_every if night > 1 else -1
        if kind == 9:
            yield PageResult(url, 0, "seed", "failed", reason="HTTP 404", status=404, ms=30)
        elif kind in range(7):
            counts = RecordCounts(unchanged=shape.records)
            yield PageResult(url, 0, "seed", "not_modified", status=304, counts=counts, digests=digests, reused=True)
        else:
            counts = RecordCounts(new=shape.records) if night == 1 else RecordCounts(changed=1, unchanged=9)
            block = PartBlock(part_id, len(body), sum(map(len, lines)))
            body += b"".join(lines)
            yield PageResult(
                url, 0, "seed", "fetched", status=200, counts=counts, digests=digests, block=block, ms=120 + n % 50
            )
    if body:
        store.objects.put(part_key(CRAWL, run_id, part_id), bytes(body), "application/x-ndjson")

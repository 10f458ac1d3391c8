"""A run's URLs in SQLite: :class:`sluice.ports.Frontier` with exact counts (one transaction per batch).

The run's counts (links claimed, URLs done, records, failures) are kept in ``run_counts`` in the same
transactions that change them: exact, and :meth:`progress` reads them in constant time. The claim's room
check (``max_pages``) instead counts the run's link rows (``SELECT COUNT(*)``, linear in the links
claimed) inside its own transaction: exact even for a link row a completion inserted unclaimed.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from sluice.adapters.aws import codec
from sluice.adapters.aws.sizes import item_bytes
from sluice.adapters.local.errors import local_errors
from sluice.adapters.local.store import Database
from sluice.domain.pages import PageResult, UrlEntry, url_hash
from sluice.domain.runs import Progress, claim_room
from sluice.domain.shards import Shard
from sluice.jsontext import json_text
from sluice.messages import UrlTask
from sluice.ports import Claims

_PAGE = 1_000
"""Rows per read while scanning: the lock is released between pages, so workers keep going."""
_COMPACT_JSON = json_text(separators=(",", ":"))
"""``json.dumps(value, separators=(",", ":"))``, its encoder built once (``json.dumps`` builds one a call)."""


@local_errors
class SqliteFrontier:
    """:class:`sluice.ports.Frontier` on SQLite. Progress is counted, not reported: it is exact."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def entries(self, run_id: str, url_hashes: Sequence[str]) -> dict[str, UrlEntry]:
        found: dict[str, UrlEntry] = {}
        hashes = list(dict.fromkeys(url_hashes))
        with self._db.reading() as db:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                rows = db.execute(
                    f"SELECT url_hash, url, depth, origin, parent, result, link FROM urls "  # noqa: S608 - placeholders only
                    f"WHERE run_id = ? AND url_hash IN ({','.join('?' * len(chunk))})",
                    (run_id, *chunk),
                ).fetchall()
                found |= {row[0]: _entry(row) for row in rows}
        return found

    def by_prefix(self, run_id: str, prefixes: Sequence[str]) -> dict[str, UrlEntry]:
        found: dict[str, UrlEntry] = {}
        with self._db.reading() as db:
            for prefix in dict.fromkeys(prefixes):
                row = db.execute(
                    "SELECT url_hash, url, depth, origin, parent, result, link FROM urls "
                    "WHERE run_id = ? AND url_hash >= ? AND url_hash < ? AND done = 1 LIMIT 1",
                    (run_id, prefix, prefix + "g"),  # hex digits sort below "g": every hash that starts so
                ).fetchone()
                if row is not None:
                    found[prefix] = _entry(row)
        return found

    def claim(self, run_id: str, tasks: Sequence[UrlTask], *, seeds: int, max_pages: int) -> Claims:
        won: list[UrlTask] = []
        capped: list[UrlTask] = []
        with self._db.transaction() as db:
            (links,) = db.execute(
                "SELECT COUNT(*) FROM urls WHERE run_id = ? AND origin = 'link'", (run_id,)
            ).fetchone()
            room = claim_room(max_pages, seeds, links)  # exact: counted in the same transaction as the inserts
            for n, task in enumerate(tasks):
                if len(won) >= room:
                    capped = self._unknown(db, run_id, tasks[n:])
                    break
                inserted = db.execute(
                    "INSERT INTO urls (run_id, url_hash, url, depth, origin, parent, link) "
                    "VALUES (?, ?, ?, ?, 'link', ?, ?) ON CONFLICT DO NOTHING RETURNING url_hash",
                    (run_id, url_hash(task.url), task.url, task.depth, task.parent, _link(task)),
                ).fetchone()
                if inserted is not None:
                    won.append(task)
            _counts(db, run_id)  # the row may not be there yet: a run's first claims come before its first completion
            db.execute("UPDATE run_counts SET links = links + ? WHERE run_id = ?", (len(won), run_id))
        return Claims(won, capped)

    @staticmethod
    def _unknown(db: sqlite3.Connection, run_id: str, tasks: Sequence[UrlTask]) -> list[UrlTask]:
        """The tasks whose URLs the run does not hold: what the cap left out (exact, in the claim's transaction)."""
        return [
            t
            for t in tasks
            if db.execute("SELECT 1 FROM urls WHERE run_id = ? AND url_hash = ?", (run_id, url_hash(t.url))).fetchone()
            is None
        ]

    def complete(self, run_id: str, results: Sequence[PageResult]) -> list[bool]:
        """Each result written if its URL is not done yet (a conditional write a URL, as DynamoDB's): which were.

        In one transaction: the URLs already done are read first (at most 500 a statement), then every other
        result is written in one ``executemany``; a URL twice in ``results`` counts its first result only."""
        rows = [
            (
                run_id,
                url_hash(r.url),
                r.url,
                r.depth,
                r.origin,
                r.parent,
                r.outcome,
                r.records,
                _dump(r),
            )
            for r in results
        ]
        counted: list[bool] = []
        with self._db.transaction() as db:
            done = self._done(db, run_id, [row[1] for row in rows])
            writes = []
            for row in rows:
                fresh = row[1] not in done
                counted.append(fresh)
                if fresh:
                    done.add(row[1])
                    writes.append(row)
            db.executemany(
                "INSERT INTO urls (run_id, url_hash, url, depth, origin, parent, done, outcome, records, result) "
                "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?) "
                "ON CONFLICT (run_id, url_hash) DO UPDATE SET done = 1, outcome = excluded.outcome, "
                "records = excluded.records, result = excluded.result, "
                "parent = COALESCE(urls.parent, excluded.parent) WHERE urls.done = 0",
                writes,
            )
            won = [r for r, ok in zip(results, counted, strict=True) if ok]
            _counts(db, run_id)
            db.execute(
                "UPDATE run_counts SET done = done + ?, records = records + ?, failed = failed + ? WHERE run_id = ?",
                (len(won), sum(r.records for r in won), sum(r.outcome == "failed" for r in won), run_id),
            )
        return counted

    @staticmethod
    def _done(db: sqlite3.Connection, run_id: str, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` the run has done (inside the caller's transaction)."""
        done: set[str] = set()
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            done.update(
                h
                for (h,) in db.execute(
                    f"SELECT url_hash FROM urls WHERE run_id = ? AND done = 1 "  # noqa: S608 - placeholders only
                    f"AND url_hash IN ({','.join('?' * len(chunk))})",
                    (run_id, *chunk),
                )
            )
        return done

    def replace(self, run_id: str, results: Sequence[PageResult]) -> int:
        replaced = 0
        with self._db.transaction() as db:
            for result in results:
                row = db.execute(
                    "UPDATE urls SET outcome = ?, records = ?, result = ? "
                    "WHERE run_id = ? AND url_hash = ? AND done = 1 RETURNING url_hash",
                    (result.outcome, result.records, _dump(result), run_id, url_hash(result.url)),
                ).fetchone()
                replaced += row is not None
        return replaced

    def scan(self, run_id: str, *, consistent: bool = True, shard: Shard | None = None) -> Iterator[UrlEntry]:
        return map(_entry, self._rows(run_id, shard))

    def scan_sized(self, run_id: str, *, shard: Shard | None = None) -> Iterator[tuple[UrlEntry, int]]:
        """Each entry sized from the result as stored (what :func:`codec.result_plain` made of it, its digests
        decoded), not from its result encoded again: one JSON parse and one decode a URL, no encode."""
        own: dict[tuple[str, int], int] = {}  # by partition and hash length: all a URL item's own size varies by
        for row in self._rows(run_id, shard):
            entry, plain = _decoded(row)
            if plain is None:
                yield entry, codec.stored_bytes(run_id, entry)
                continue
            hash_ = entry.url_hash
            where = (hash_[:1], len(hash_))
            base = own.get(where)
            if base is None:
                base = own[where] = codec.own_bytes(run_id, hash_)
            yield entry, base + item_bytes(plain)

    def held_digests(self, run_id: str, *, shard: Shard | None = None) -> Iterator[bytes]:
        """From the row's outcome and records columns and its result's one digests attribute: no result decoded."""
        rows = self._paged(
            f"SELECT url_hash, json_extract(result, '$.{codec.DIGESTS}') FROM urls "  # noqa: S608 - a constant
            "WHERE run_id = ? AND url_hash > ? AND url_hash >= ? AND url_hash <= ? AND done = 1 "
            "AND outcome IN ('fetched', 'not_modified', 'not_due') AND records > 0 "
            "ORDER BY url_hash LIMIT ?",
            run_id,
            shard,
        )
        for _, digests in rows:
            yield base64.b64decode(digests) if digests else b""

    def _rows(self, run_id: str, shard: Shard | None) -> Iterator[tuple[Any, ...]]:
        """The run's URL rows (of the shard's hash range) in hash order, a page of rows a read."""
        return self._paged(
            "SELECT url_hash, url, depth, origin, parent, result, link FROM urls "
            "WHERE run_id = ? AND url_hash > ? AND url_hash >= ? AND url_hash <= ? ORDER BY url_hash LIMIT ?",
            run_id,
            shard,
        )

    def _paged(self, query: str, run_id: str, shard: Shard | None) -> Iterator[tuple[Any, ...]]:
        """A query's rows of the run (of the shard's hash range) in hash order, :data:`_PAGE` rows a read, the lock
        released between reads. ``query`` selects ``url_hash`` first and takes, in order, the run, the last hash
        read, the range's first and last hash and the page's size."""
        whole = shard or Shard(0, 1)
        first, last = whole.partitions()[0][1], whole.partitions()[-1][2]
        after = ""
        while True:
            with self._db.reading() as db:
                rows = db.execute(query, (run_id, after, first, last, _PAGE)).fetchall()
            if not rows:
                return
            yield from rows
            after = rows[-1][0]

    def add_progress(self, run_id: str, delta: Progress) -> None:
        """Nothing to report: :meth:`progress` counts the run's URLs themselves."""

    def stored_bytes(self, run_id: str, entry: UrlEntry) -> int:
        return codec.stored_bytes(run_id, entry)

    def progress(self, run_id: str) -> Progress:
        with self._db.reading() as db:
            row = db.execute(
                "SELECT links, done, records, failed FROM run_counts WHERE run_id = ?", (run_id,)
            ).fetchone()
        claimed, done, records, failed = row if row is not None else (0, 0, 0, 0)
        return Progress(claimed=claimed, done=done, records=records, failed=failed)


def _counts(db: Any, run_id: str) -> tuple[int, int]:
    """The run's (links, done), creating its counts row on first use (inside the caller's transaction)."""
    db.execute("INSERT OR IGNORE INTO run_counts (run_id) VALUES (?)", (run_id,))
    links, done = db.execute("SELECT links, done FROM run_counts WHERE run_id = ?", (run_id,)).fetchone()
    return int(links), int(done)


def _dump(result: PageResult) -> str:
    """The result as DynamoDB keeps it (:func:`codec.result_plain`), in JSON: its digests in base64."""
    plain = codec.result_plain(result)
    if codec.DIGESTS in plain:
        plain[codec.DIGESTS] = base64.b64encode(plain[codec.DIGESTS]).decode()
    return _COMPACT_JSON(plain)


def _link(task: UrlTask) -> str | None:
    """What a claim keeps of its link besides the URL: the follow rule and the carried fields, if any."""
    link = codec.link_plain(task)
    return _COMPACT_JSON(link) if link else None


def _entry(row: tuple[Any, ...]) -> UrlEntry:
    return _decoded(row)[0]


def _decoded(row: tuple[Any, ...]) -> tuple[UrlEntry, dict[str, Any] | None]:
    """The row's entry, and its result as stored (plain values, its digests decoded), None while it waits."""
    hash_, url, depth, origin, parent, raw, link_raw = row
    link = json.loads(link_raw) if link_raw else {}
    result = plain = None
    if raw is not None:
        plain = json.loads(raw)
        if codec.DIGESTS in plain:
            plain[codec.DIGESTS] = base64.b64decode(plain[codec.DIGESTS])
        result = codec.result_from_plain(plain)
    entry = UrlEntry(
        url_hash=hash_,
        url=url,
        depth=depth,
        origin=origin,
        parent=parent,
        result=result,
        via=link.get(codec.VIA),
        carry=link.get(codec.CARRY),
    )
    return entry, plain

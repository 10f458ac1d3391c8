"""One SQLite file in the state folder: the run ledger, every run's URLs, the queue and the records table.

WAL mode, one transaction per port call, ``synchronous=NORMAL``: a write that returned survives
the process being killed (``kill -9``) at any later point, which is what makes a local run
resumable. One connection shared by the runner's threads, behind one lock: SQLite serializes
writers anyway, and each call is short (a batch's writes are one transaction).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    crawl TEXT NOT NULL, run_id TEXT NOT NULL, state TEXT NOT NULL,
    PRIMARY KEY (crawl, run_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS locks (
    crawl TEXT PRIMARY KEY, run_id TEXT NOT NULL, started_at TEXT NOT NULL, deadline TEXT NOT NULL, trigger TEXT
);
CREATE TABLE IF NOT EXISTS urls (
    run_id TEXT NOT NULL, url_hash TEXT NOT NULL, url TEXT NOT NULL, depth INTEGER NOT NULL,
    origin TEXT NOT NULL, parent TEXT, done INTEGER NOT NULL DEFAULT 0,
    outcome TEXT, records INTEGER NOT NULL DEFAULT 0, result TEXT, link TEXT,
    PRIMARY KEY (run_id, url_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_counts (
    run_id TEXT PRIMARY KEY, links INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
    records INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, body TEXT NOT NULL, visible_at REAL NOT NULL,
    receives INTEGER NOT NULL DEFAULT 0, receipt TEXT, sent_at REAL NOT NULL, grp TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS queue_by_visibility ON queue (run_id, visible_at);
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL, receives INTEGER NOT NULL, moved_at REAL NOT NULL,
    grp TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS hosts (
    host TEXT PRIMARY KEY, state TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    crawl TEXT NOT NULL, record_key TEXT NOT NULL, content_hash TEXT NOT NULL, data TEXT NOT NULL,
    run_id TEXT NOT NULL, page TEXT NOT NULL,
    PRIMARY KEY (crawl, record_key)
) WITHOUT ROWID;
"""
DB_NAME = "sluice.db"


class Database:
    """The state folder's SQLite file, opened once per process."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / DB_NAME
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.RLock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(SCHEMA)
            self._migrate()

    def _migrate(self) -> None:
        """Bring a state folder an older version wrote up to this schema (columns added since)."""
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(queue)")}
        if "grp" not in columns:
            self._conn.execute("ALTER TABLE queue ADD COLUMN grp TEXT NOT NULL DEFAULT ''")
        self._conn.execute("CREATE INDEX IF NOT EXISTS queue_by_group ON queue (run_id, grp, id)")
        # A claim keeps the follow rule and the carried fields of its link (page types), sent again with it.
        if "link" not in {row[1] for row in self._conn.execute("PRAGMA table_info(urls)")}:
            self._conn.execute("ALTER TABLE urls ADD COLUMN link TEXT")
        # A dead letter keeps its group, as SQS keeps a message's group id: a redrive sends it back to it.
        if "grp" not in {row[1] for row in self._conn.execute("PRAGMA table_info(dead_letters)")}:
            self._conn.execute("ALTER TABLE dead_letters ADD COLUMN grp TEXT NOT NULL DEFAULT ''")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the writer's lock taken up front, no upgrade deadlock)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

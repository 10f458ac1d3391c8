"""The catalog's seed tasks as the fan-out's one scan of the catalog made them, kept under the run's work prefix.

A run seeded from its catalog run needs that run's URL entries twice: for the run's seed set, which is
written before any seed is sent (fetchers never claim a link that is a seed), and for the tasks sent
after it. Read twice from DynamoDB, every entry's whole item is billed twice (a projection does not
help: DynamoDB bills a read by the size of the items it reads). So the scan that makes the seed set
also writes each task, in the order they are sent, to objects of :data:`PLAN_TASKS` tasks (a PUT per
10,000 pages, about 6 MB); the sends, and any continuation of the fan-out, read them back (a GET each,
a tenth of a PUT's price) instead of scanning the catalog again.

Two streams: ``a``, sent first, and ``b``, the pages a linking page carried data to, sent after every
page that may carry to them (:meth:`~sluice.messages.UrlTask.awaits_linking_page`). ``b``'s objects are
written first and ``a``'s last object last, ending with a line that says how many objects ``b`` has:
a plan whose last line is not there is not whole, and is never read as if it were. A retried start
writes the plan again from its own scan (the same tasks: a finished run's entries no longer change).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count

from sluice.domain.layout import work_prefix
from sluice.messages import MalformedMessage, UrlTask, parse_body
from sluice.ports import ObjectStore

PLAN_TASKS = 10_000
"""Tasks to an object: about 6 MB of a nightly crawl's tasks, well inside a scheduler's memory."""
_CONTENT_TYPE = "application/x-ndjson"
_END = '{"end":'
"""How the plan's last line begins (a task's line begins ``{"url":``)."""


def plan_key(crawl: str, run_id: str, stream: str, seq: int) -> str:
    """One object of the run's stored catalog tasks: ``plan/a-000000.jsonl``, ``plan/b-000000.jsonl``, ..."""
    return f"{work_prefix(crawl, run_id)}plan/{stream}-{seq:06d}.jsonl"


@dataclass
class PlanWriter:
    """Collects the catalog's tasks as the scan makes them and writes them an object at a time."""

    objects: ObjectStore
    crawl: str
    run_id: str
    lines: dict[str, list[str]] = field(default_factory=lambda: {"a": [], "b": []})
    written: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})

    def add(self, task: UrlTask, *, after_linking_pages: bool) -> None:
        stream = "b" if after_linking_pages else "a"
        self.lines[stream].append(task.model_dump_json())
        if len(self.lines[stream]) >= PLAN_TASKS:
            self._write(stream)

    def finish(self) -> None:
        """Write what is left: ``b`` first, then ``a``'s last object, which names ``b``'s objects."""
        if self.lines["b"]:
            self._write("b")
        self.lines["a"].append(json.dumps({"end": True, "b": self.written["b"]}, separators=(",", ":")))
        self._write("a")

    def _write(self, stream: str) -> None:
        body = ("\n".join(self.lines[stream]) + "\n").encode()
        self.objects.put(plan_key(self.crawl, self.run_id, stream, self.written[stream]), body, _CONTENT_TYPE)
        self.written[stream] += 1
        self.lines[stream] = []


@dataclass
class StoredPlan:
    """A run's stored catalog tasks, its first object already read (:meth:`open`)."""

    objects: ObjectStore
    crawl: str
    run_id: str
    first: bytes

    @classmethod
    def open(cls, objects: ObjectStore, crawl: str, run_id: str) -> StoredPlan | None:
        """The run's stored plan, or None when its fan-out stored none (it began before plans were stored)."""
        first = objects.get(plan_key(crawl, run_id, "a", 0))
        return None if first is None else cls(objects, crawl, run_id, first)

    def tasks(self) -> Iterator[UrlTask]:
        """The tasks in the order they are sent. Raises ValueError when an object of the plan is gone."""
        b_objects: int | None = None
        for seq in count():
            raw = self.first if seq == 0 else self._get("a", seq)
            for line in raw.decode().splitlines():
                if line.startswith(_END):
                    b_objects = int(json.loads(line)["b"])
                    break
                yield self._task(line, "a", seq)
            if b_objects is not None:
                break
        for seq in range(b_objects or 0):
            for line in self._get("b", seq).decode().splitlines():
                yield self._task(line, "b", seq)

    def _get(self, stream: str, seq: int) -> bytes:
        raw = self.objects.get(plan_key(self.crawl, self.run_id, stream, seq))
        if raw is None:
            raise ValueError(f"the run's stored seed plan lacks {stream}-{seq:06d}: start a new run")
        return raw

    @staticmethod
    def _task(line: str, stream: str, seq: int) -> UrlTask:
        try:
            return parse_body(UrlTask, line)
        except MalformedMessage as exc:
            raise ValueError(f"the run's stored seed plan {stream}-{seq:06d}: {exc}") from exc

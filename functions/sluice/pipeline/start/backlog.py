"""Each host's backlog in the queue, capped: the seeds past a host's cap wait in S3 and follow in waves.

SQS FIFO looks for a deliverable message group among the first 120,000 messages of a queue only,
and holds at most 120,000 in flight. A fan-out in seed order puts a host with millions of URLs
ahead of every other host: the fleet then sees one group and crawls one host at a time. So the
fan-out sends at most ``cap`` URLs of a host straight to the queue; the rest are written, in the
host's own order, in waves of ``cap`` URLs, :data:`WAVES_PER_CHUNK` waves to an object under the
run's work prefix (``backlog/HOST_ID/SEQ``: one PUT per 2,000 URLs at the default cap). Queued
messages then stay under hosts x (cap + 1), whatever order the seeds come in.

The refill is the fetchers' own: the host's cap-th task carries a pointer to its first wave, and
the last task of each wave a pointer to the next (``HOST_ID/SEQ/WAVE``). The fetcher that visits a
pointing task reads the wave's chunk and sends that wave before its batch is acknowledged
(:func:`send_backlog`; a GET per wave, a tenth of a PUT's price): a failure is a redelivery, which
sends it again (its tasks marked ``again``, so done URLs are looked up, not fetched), as a page re-sends
the links it claimed. No cursor item, no polling loop, and a host's messages keep their order (a
listing before its books): a chunk is sent only after every message before it was sent.

Every chunk is written before anything points at it: the cap-th task of a host is held until the fan-out
ends, then sent, by when all chunks are in place. A pointer to a chunk that is absent is then the end of
the host's backlog (only a flush under memory pressure points ahead speculatively). The chunks' contents
depend on the task stream alone (a buffer flushes when it passes a chunk or the memory budget, never on
time), so a continuation or a retried start rewrites them byte for byte, up to ``again``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice.domain.hosts import host_key
from sluice.domain.layout import backlog_cursor_key, backlog_key
from sluice.messages import MalformedMessage, UrlTask, parse_body
from sluice.pipeline.services import Services
from sluice.ports import ObjectStore

WAVES_PER_CHUNK = 10
"""Waves of a host's backlog to one chunk object: a PUT is 12.5 times a GET's price, so waves share one."""
BUFFER_BYTES = 128 * 1024 * 1024
"""The scheduler's spill buffers stay under this (the largest are written early as partial chunks past it)."""
_CONTENT_TYPE = "application/x-ndjson"
_STR_OVERHEAD = 64
"""What a buffered line costs beyond its characters (a str object and its slot in the list)."""


def host_id(host: str) -> str:
    """A host's name in backlog keys: 16 hex characters of its key's hash (any host, any length)."""
    return hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def chunk_name(host: str, seq: int) -> str:
    """A chunk object's name under ``backlog/``: ``HOST_ID/SEQ``."""
    return f"{host_id(host)}/{seq:06d}"


def wave_name(host: str, seq: int, wave: int) -> str:
    """What a task points at: ``HOST_ID/SEQ/WAVE``."""
    return f"{chunk_name(host, seq)}/{wave:02d}"


def in_order(tasks: Iterable[UrlTask], size: int) -> Iterator[list[UrlTask]]:
    """Sends of up to ``size`` tasks, a new one where the pages a linking page carried data to begin: a send's
    requests go out in parallel, so only a send that ended before the next began keeps a host's linking pages
    ahead of the pages they carry to in its message group."""
    chunk: list[UrlTask] = []
    kind = False
    for task in tasks:
        carried_to = task.awaits_linking_page
        if chunk and (len(chunk) >= size or carried_to != kind):
            yield chunk
            chunk = []
        chunk.append(task)
        kind = carried_to
    if chunk:
        yield chunk


@dataclass
class _Host:
    direct: int = 0
    """Tasks of the host sent (or held) straight to the queue: at most the cap."""
    held: UrlTask | None = None
    """The cap-th task, sent when the fan-out ends, pointing at chunk 0 if there is one."""
    seq: int = 0
    """Chunks written."""
    lines: list[str] = field(default_factory=list)
    """Each buffered task as its chunk line: a line is a tenth of a task object's memory."""
    size: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "direct": self.direct,
            "held": self.held.model_dump(mode="json") if self.held is not None else None,
            "seq": self.seq,
            "lines": self.lines,
        }


@dataclass
class HostBacklog:
    """The fan-out's router: a task goes to the queue now, is held, or waits in its host's next chunk."""

    crawl: str
    run_id: str
    objects: ObjectStore
    cap: int
    """URLs of a host in the queue at once (``host_backlog_messages`` x ``urls_per_message``); 0: no cap."""
    budget: int = BUFFER_BYTES
    hosts: dict[str, _Host] = field(default_factory=dict)
    buffered: int = 0
    chunks_written: int = 0

    def route(self, tasks: Sequence[UrlTask]) -> list[UrlTask]:
        """The tasks to send now; the others are held or spilled (chunks written as they fill)."""
        if self.cap <= 0:
            return list(tasks)
        now: list[UrlTask] = []
        for task in tasks:
            host = host_key(task.url)
            state = self.hosts.get(host)
            if state is None:
                state = self.hosts[host] = _Host()
            if state.direct < self.cap - 1:
                state.direct += 1
                now.append(task)
            elif state.held is None:
                state.direct += 1
                state.held = task
            else:
                self._spill(host, state, task)
        return now

    def _spill(self, host: str, state: _Host, task: UrlTask) -> None:
        line = task.model_dump_json() + "\n"
        size = len(line) + _STR_OVERHEAD
        state.lines.append(line)
        state.size += size
        self.buffered += size
        if len(state.lines) > self.cap * WAVES_PER_CHUNK:  # a whole chunk, and at least one task after it
            self._write(host, state, self.cap * WAVES_PER_CHUNK, more=True)
        if self.buffered > self.budget:
            self._relieve()

    def _relieve(self) -> None:
        """Write the largest buffers (a deterministic order) until half the budget is free."""
        for host, state in sorted(self.hosts.items(), key=lambda kv: (-kv[1].size, kv[0])):
            if self.buffered <= self.budget // 2 or not state.lines:
                break
            self._write(host, state, len(state.lines), more=True)

    def _write(self, host: str, state: _Host, count: int, *, more: bool) -> None:
        lines, state.lines = state.lines[:count], state.lines[count:]
        written = sum(len(line) + _STR_OVERHEAD for line in lines)
        waves = math.ceil(len(lines) / self.cap)
        for wave in range(waves):
            last = min(len(lines), (wave + 1) * self.cap) - 1
            pointer = wave_name(host, state.seq, wave + 1) if wave + 1 < waves else None
            if pointer is None and more:
                pointer = wave_name(host, state.seq + 1, 0)
            if pointer is not None:
                task = UrlTask.model_validate_json(lines[last])
                lines[last] = task.model_copy(update={"backlog": pointer}).model_dump_json() + "\n"
        body = "".join(lines).encode()
        self.objects.put(backlog_key(self.crawl, self.run_id, chunk_name(host, state.seq)), body, _CONTENT_TYPE)
        self.chunks_written += 1
        state.seq += 1
        state.size -= written
        self.buffered -= written

    def finish(self) -> list[UrlTask]:
        """Write every host's last chunk; the held tasks, each pointing at its host's first chunk if any."""
        held: list[UrlTask] = []
        for host, state in self.hosts.items():
            if state.held is None:
                continue
            if state.lines:
                self._write(host, state, len(state.lines), more=False)
            task = state.held
            if state.seq > 0:
                task = task.model_copy(update={"backlog": wave_name(host, 0, 0)})
            held.append(task)
            state.held = None
        return held

    def save(self, offset: int) -> None:
        """Leave the router's state for the continuation that starts at ``offset``."""
        if self.cap <= 0:
            return
        body = json.dumps(
            {"cap": self.cap, "chunks": self.chunks_written, "hosts": {h: s.to_json() for h, s in self.hosts.items()}},
            separators=(",", ":"),
        ).encode()
        self.objects.put(backlog_cursor_key(self.crawl, self.run_id, offset), body, "application/json")

    @classmethod
    def resume(cls, crawl: str, run_id: str, objects: ObjectStore, cap: int, offset: int) -> HostBacklog:
        """The router as the fan-out that handed over at ``offset`` left it. Raises ValueError when it is gone."""
        backlog = cls(crawl, run_id, objects, cap)
        if cap <= 0 or offset == 0:
            return backlog
        raw = objects.get(backlog_cursor_key(crawl, run_id, offset))
        if raw is None:
            raise ValueError(f"the fan-out's backlog state at seed {offset} is gone from its work prefix")
        saved = json.loads(raw)
        if saved["cap"] != cap:
            raise ValueError(f"the host backlog cap changed mid-run ({saved['cap']} to {cap} URLs)")
        backlog.chunks_written = int(saved["chunks"])
        for host, h in saved["hosts"].items():
            lines = [str(line) for line in h["lines"]]
            held = UrlTask.model_validate(h["held"]) if h["held"] is not None else None
            size = sum(len(line) + _STR_OVERHEAD for line in lines)
            backlog.hosts[host] = _Host(h["direct"], held, h["seq"], lines, size)
            backlog.buffered += size
        return backlog


@dataclass(frozen=True, slots=True)
class Refill:
    waves: int
    tasks: int


def send_backlog(services: Services, crawl: str, run_id: str, pointers: Sequence[tuple[str, bool]]) -> Refill:
    """Send the backlog waves ``(wave, again)`` name, each in the order it was written; a wave whose chunk is
    absent is the end of its host's backlog. ``again`` (a redelivered message, a re-sent task) marks the wave's
    tasks as maybe done. Raises what the store or queue raise: the caller's message is then redelivered.

    Only the tasks of the waves sent are parsed (a chunk holds ten waves, and a refill sends one): the waves'
    bounds are found from the lines that can hold a pointer. A malformed line is refused when its wave is sent."""
    waves: dict[str, bool] = {}
    for wave, again in pointers:
        waves[wave] = waves.get(wave, False) or again
    chunks: dict[str, _Chunk | None] = {}
    sent = Refill(0, 0)
    for wave, again in waves.items():
        chunk, _, number = wave.rpartition("/")
        if chunk not in chunks:
            raw = services.objects.get(backlog_key(crawl, run_id, chunk))
            chunks[chunk] = None if raw is None else _Chunk(chunk, [line for line in raw.decode().splitlines() if line])
        found = chunks[chunk]
        tasks = found.wave(int(number)) if found is not None else None
        if tasks is None:
            continue
        if again:
            tasks = [t.model_copy(update={"again": True}) for t in tasks]
        for send in in_order(tasks, len(tasks)):
            services.queue.send(crawl, run_id, send)
        sent = Refill(sent.waves + 1, sent.tasks + len(tasks))
    return sent


_POINTER_FIELD = '"backlog"'
"""Every line whose task points at a wave holds this (and few others do: a carried field of that name)."""


class _Chunk:
    """A chunk's lines, parsed a wave at a time: each wave ends with the task that points at the next (the last
    wave may point nowhere)."""

    def __init__(self, name: str, lines: list[str]) -> None:
        self._name = name
        self._lines = lines
        self._decoded: dict[int, dict[str, Any]] = {}
        """The lines that may point, decoded to find the waves' bounds (and parsed from that when sent)."""
        self._bounds: list[tuple[int, int]] | None = None

    def wave(self, number: int) -> list[UrlTask] | None:
        """The tasks of wave ``number``; None past the chunk's last wave."""
        bounds = self._waves()
        if number >= len(bounds):
            return None
        start, stop = bounds[number]
        return [self._task(n) for n in range(start, stop)]

    def _waves(self) -> list[tuple[int, int]]:
        if self._bounds is None:
            starts = [0]
            for n, line in enumerate(self._lines):
                if _POINTER_FIELD in line and self._decode(n).get("backlog") is not None:
                    starts.append(n + 1)
            starts.append(len(self._lines))
            self._bounds = [(a, b) for a, b in itertools.pairwise(starts) if a < b]
        return self._bounds

    def _decode(self, n: int) -> dict[str, Any]:
        found = self._decoded.get(n)
        if found is None:
            try:
                decoded = json.loads(self._lines[n])
            except json.JSONDecodeError as exc:
                raise MalformedMessage(f"backlog chunk {self._name}: body is not JSON: {exc}") from exc
            if not isinstance(decoded, dict):
                raise MalformedMessage(f"backlog chunk {self._name}: a line is a JSON {type(decoded).__name__}")
            found = self._decoded[n] = decoded
        return found

    def _task(self, n: int) -> UrlTask:
        body: str | dict[str, Any] = self._decoded.get(n) or self._lines[n]
        try:
            return parse_body(UrlTask, body)
        except MalformedMessage as exc:
            raise MalformedMessage(f"backlog chunk {self._name}: {exc}") from exc

"""The events and queue messages the functions exchange, validated at the edge.

A message that does not parse is a :class:`MalformedMessage` naming what is wrong; it is never
half-processed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sluice.domain.hosts import group_id, host_key
from sluice.domain.pages import MAX_ARCHIVE_REF, MAX_DIGESTS, MAX_URL, RECORD_DIGEST_BYTES, ArchiveRef, Prior
from sluice.domain.recrawl import MAX_INTERVAL_S
from sluice.spec import MAX_SEED_URLS
from sluice.spec.models import MAX_CARRY_BYTES

CrawlName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
RunId = Annotated[str, Field(pattern=r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")]
MAX_DIGEST_BYTES = MAX_DIGESTS * RECORD_DIGEST_BYTES
"""A task carries the digests of up to 2,000 records (a page with more is classified as all new)."""
MAX_DIGESTS_B64 = 4 * ((MAX_DIGEST_BYTES + 2) // 3)
MAX_DIGESTS_B85 = 5 * ((MAX_DIGEST_BYTES + 3) // 4)
_ARCHIVE_REF = r"^[0-9A-Za-z-]+/[0-9a-f]+/[0-9]+/[0-9]+$"
BACKLOG_WAVE = r"^[0-9a-f]{16}/[0-9]{6}/[0-9]{2}$"
"""A wave of a host's backlog: the host's id (16 hex characters of its key's hash), its chunk's number, the wave's."""
MAX_ETAG, MAX_LM = 1024, 256
"""Longest ETag and Last-Modified a task carries (a site can send longer; those pages are fetched whole)."""


class MalformedMessage(ValueError):
    """An event or message body that is not what its function takes; the text says what is wrong."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class PriorState(_Message):
    """What the catalog run knew of a page (:class:`~sluice.domain.pages.Prior`), compact for the queue."""

    etag: Annotated[str, Field(max_length=MAX_ETAG)] | None = None
    lm: Annotated[str, Field(max_length=MAX_LM)] | None = None
    body: Annotated[str, Field(max_length=64)] | None = None
    n: Annotated[int, Field(ge=0)] = 0
    d: Annotated[str, Field(max_length=MAX_DIGESTS_B64)] = ""
    """The page's record digests, base64 (empty when it had more than the queue carries, or they are in ``z``)."""
    # Left out of a message when absent: a task without digests is as it was, byte for byte.
    z: Annotated[str | None, Field(max_length=MAX_DIGESTS_B85, exclude_if=lambda v: v is None)] = None
    """The same digests in base85, 6% shorter than base64: a nightly task is mostly digests, and ten messages of
    ten such tasks then stay under the 64 KB SQS bills as one request (``d`` still decodes, from older senders)."""
    c: bool = False
    """The page's records are in the catalog run's output (a 304 reuses them): ``Prior.reused``, "c" on the wire."""
    ft: Annotated[int, Field(ge=0)] | None = None
    """When the page was last fetched successfully (epoch seconds): what a sitemap's lastmod is compared with."""
    # Left out of a message when absent: a spec without ``recrawl`` sends the tasks it sent before, byte for byte.
    iv: Annotated[int | None, Field(ge=1, le=MAX_INTERVAL_S, exclude_if=lambda v: v is None)] = None
    """The page's recrawl interval in seconds: it is not asked again until ``ft`` + this (nearly) has passed."""
    # Left out of a message when absent: a task of a crawl without output.archive is as it was, byte for byte.
    a: Annotated[
        str | None,
        Field(max_length=MAX_ARCHIVE_REF, pattern=_ARCHIVE_REF, exclude_if=lambda v: v is None),
    ] = None
    """Where the response the page's records come from is archived (``RUN/FILE/OFFSET/LENGTH``): a reused page
    keeps it, so a re-extraction reaches every page's bytes."""

    @classmethod
    def of(cls, prior: Prior) -> PriorState:
        """The task's copy of a prior; validators a site made longer than a task takes are left out (no 304)."""
        digests = base64.b85encode(prior.digests).decode() if 0 < len(prior.digests) <= MAX_DIGEST_BYTES else None
        etag = prior.etag if prior.etag is None or len(prior.etag) <= MAX_ETAG else None
        modified = prior.last_modified if prior.last_modified is None or len(prior.last_modified) <= MAX_LM else None
        if (etag, modified) != (prior.etag, prior.last_modified):
            etag = modified = None  # one validator alone could say "not modified" where the other would not
        return cls(
            etag=etag,
            lm=modified,
            body=prior.body_hash,
            n=prior.records,
            z=digests,
            c=prior.reused,
            ft=prior.fetched_at,
            iv=prior.interval,
            a=prior.archive.to_text() if prior.archive is not None else None,
        )

    def prior(self) -> Prior:
        archive = ArchiveRef.from_text(self.a) if self.a is not None else None
        return Prior(
            etag=self.etag,
            last_modified=self.lm,
            body_hash=self.body,
            records=self.n,
            digests=base64.b85decode(self.z) if self.z is not None else base64.b64decode(self.d),
            reused=self.c,
            fetched_at=self.ft,
            interval=self.iv,
            archive=archive,
        )


class UrlTask(_Message):
    """One URL of a run: how many link hops it is from a seed, who found it, what the catalog knew of it."""

    url: Annotated[str, Field(min_length=8, max_length=MAX_URL)]
    # A field at its default is left out of a message (it decodes to the same): a catalog's task is a seed at depth
    # 0 with no parent, lastmod nor ``again``, and those bytes, 10% of a nightly task, are what tips ten messages
    # of ten tasks past the 64 KB SQS bills as one request.
    depth: Annotated[int, Field(ge=0, le=MAX_SEED_URLS, exclude_if=lambda v: v == 0)] = 0
    origin: Annotated[Literal["seed", "link"], Field(exclude_if=lambda v: v == "seed")] = "seed"
    parent: Annotated[str | None, Field(pattern=r"^[0-9a-f]{16}$", exclude_if=lambda v: v is None)] = None
    """The first 16 hex characters of the URL hash of the page that claimed this link."""
    prior: Annotated[PriorState | None, Field(exclude_if=lambda v: v is None)] = None
    again: Annotated[bool, Field(exclude_if=lambda v: v is False)] = False
    """Sent before (a re-sent link, a resumed fan-out): it may be done already, so it is looked up first."""
    lastmod: Annotated[int | None, Field(ge=0, exclude_if=lambda v: v is None)] = None
    """A sitemap's lastmod for the page, as the latest epoch second it can mean: a page whose last successful
    fetch came after it is not requested (:meth:`~sluice.domain.pages.Prior.not_due`)."""
    # Left out of a message when absent: a one-type spec's tasks are as they were, byte for byte.
    via: Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$", exclude_if=lambda v: v is None)] = None
    """The page type's follow rule whose link this is (a spec with ``types``): it helps say the page's type."""
    carry: Annotated[dict[str, str | int | float | bool | None] | None, Field(exclude_if=lambda v: v is None)] = None
    """Fields the linking page carried to this one, merged into its records; JSON scalars, bounded."""
    # Left out of a message when absent: a host under its backlog cap sends the tasks it sent before, byte for byte.
    backlog: Annotated[str | None, Field(pattern=BACKLOG_WAVE, exclude_if=lambda v: v is None)] = None
    """The next wave of its host's backlog (``HOST_ID/CHUNK/WAVE``, :mod:`sluice.pipeline.start.backlog`): the fetcher
    that visits this task sends that wave's tasks before its batch is acknowledged, so the host's seeds follow."""

    @property
    def awaits_linking_page(self) -> bool:
        """A page seeded from the catalog with data its linking page carried: it takes that page's data of this
        run, so it is sent after, and visited after, the pages that may carry to it."""
        return self.origin == "seed" and bool(self.carry) and self.parent is not None

    @field_validator("carry")
    @classmethod
    def _bounded(cls, carry: dict[str, Any] | None) -> dict[str, Any] | None:
        if carry is not None and len(json.dumps(carry, separators=(",", ":"))) > MAX_CARRY_BYTES:
            raise ValueError(f"carried data is more than the {MAX_CARRY_BYTES} bytes a task holds")
        return carry


class CrawlMessage(_Message):
    """An SQS message: several URLs of one run, so a million seeds cost a tenth as many messages."""

    v: Literal[2] = 2
    crawl: CrawlName
    run_id: RunId
    tasks: Annotated[list[UrlTask], Field(min_length=1, max_length=50)]


MESSAGE_BYTES = 64 * 1024
"""Messages stay under 64 KB: SQS bills each 64 KB of a request as one request (and stops at 256 KB)."""


def pack(crawl: str, run_id: str, tasks: Sequence[UrlTask], urls_per_message: int) -> Iterator[tuple[str, str]]:
    """``(message group, body)`` of messages of at most ``urls_per_message`` tasks and about
    :data:`MESSAGE_BYTES` each; a message holds one host's URLs, its group is the host's
    (:func:`~sluice.domain.hosts.group_id`), so one fetcher at a time holds a host."""
    by_host: dict[str, list[UrlTask]] = {}
    for task in tasks:
        by_host.setdefault(host_key(task.url), []).append(task)
    for host, host_tasks in by_host.items():
        group = group_id(host)
        chunk: list[UrlTask] = []
        size = 0
        for task in host_tasks:
            task_bytes = len(task.model_dump_json()) + 1
            if chunk and (len(chunk) >= urls_per_message or size + task_bytes > MESSAGE_BYTES - 512):
                yield group, CrawlMessage(crawl=crawl, run_id=run_id, tasks=chunk).model_dump_json()
                chunk, size = [], 0
            chunk.append(task)
            size += task_bytes
        if chunk:
            yield group, CrawlMessage(crawl=crawl, run_id=run_id, tasks=chunk).model_dump_json()


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """The parts of a received queue message a fetcher reads (an SQS record, or what a receive returned)."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> QueuedMessage:
        return cls(
            message_id=record["messageId"],
            receipt_handle=record["receiptHandle"],
            body=record["body"],
            receive_count=int(record.get("attributes", {}).get("ApproximateReceiveCount", 1)),
        )


class StartEvent(_Message):
    """What starts a run: the EventBridge schedule's input, or ``sluice start``. ``offset`` continues a fan-out.

    ``trigger`` is the id of the schedule's event: Lambda's retry of a failed start carries the same
    one, so a start that died mid-fan-out resumes its own run instead of being refused by it.
    """

    crawl: CrawlName
    run_id: RunId | None = None
    offset: Annotated[int, Field(ge=0)] = 0
    trigger: Annotated[str, Field(min_length=1, max_length=128)] | None = None
    resumed: bool = False
    """A fan-out an interrupted command left (``sluice run`` resuming): what it sends may be done already."""


class FinalizeEvent(_Message):
    """Finalize one run, or (no run id) sweep every open run of every crawl that is done or overdue."""

    crawl: CrawlName | None = None
    run_id: RunId | None = None


class ShardTask(_Message):
    """One finalize shard task (a message of the finalize shards' queue): which attempt, phase and shard."""

    crawl: CrawlName
    run_id: RunId
    attempt: Annotated[str, Field(pattern=r"^[0-9]{1,12}-[0-9a-f]{6}$")]
    count: Annotated[int, Field(ge=1, le=65_536)]
    phase: Literal["scan", "keys", "write"]
    shard: Annotated[int, Field(ge=0, lt=65_536)]
    force: bool = False
    stopped: Annotated[str, Field(max_length=1000)] | None = None
    swept: bool = False
    settled: bool = False

    @field_validator("count")
    @classmethod
    def _power_of_two(cls, count: int) -> int:
        if count & (count - 1):
            raise ValueError(f"a shard count is a power of two, not {count}")
        return count

    def attempt_plain(self) -> dict[str, Any]:
        return self.model_dump(exclude={"phase", "shard"})


M = TypeVar("M", bound=_Message)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors())


def parse_body(model: type[M], body: str | bytes | dict[str, Any]) -> M:
    """Parse a JSON body (or an already-decoded event) into ``model``, or raise MalformedMessage."""
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedMessage(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise MalformedMessage(f"body is a JSON {type(body).__name__}, not an object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise MalformedMessage(f"not a valid {model.__name__}: {_problems(exc)}") from exc

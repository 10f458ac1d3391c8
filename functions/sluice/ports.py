"""What the pipeline steps need from the world, as narrow interfaces.

Two adapter sets implement them: ``sluice.adapters.aws`` (DynamoDB, S3, SQS, as deployed) and
``sluice.adapters.local`` (one SQLite file and a folder of objects, for ``sluice run``). The
steps in ``sluice.pipeline`` import only these protocols and the domain types.

A store's failure leaves a port as one of the domain's store errors (:mod:`sluice.domain.errors`:
``Conflict``, ``Throttled``, ``Missing``, ``Denied``, or their base ``StoreError``), never as the
library's own, so a step catches what it means.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from sluice.domain.hosts import HostState
from sluice.domain.pages import PageResult, UrlEntry
from sluice.domain.runs import Progress, RunLock, RunState
from sluice.domain.shards import Shard
from sluice.extraction.extract import Record
from sluice.messages import QueuedMessage, UrlTask


class RunLedger(Protocol):
    """Runs and the one-run-at-a-time lock of each crawl."""

    def open_run(
        self,
        crawl: str,
        spec_digest: str,
        deadline: timedelta,
        *,
        trigger: str | None,
        catalog_run: str | None,
        now: datetime | None = None,
    ) -> RunState:
        """Take the crawl's lock and open a run at ``now`` (the ledger's clock if not given); raise RunInFlight if
        another run holds it and is not overdue at ``now``."""
        ...

    def get_run(self, crawl: str, run_id: str) -> RunState | None: ...

    def active_run(self, crawl: str) -> RunLock | None: ...

    def active_runs(self) -> list[RunLock]: ...

    def latest_finished(
        self, crawl: str, before_run_id: str | None = None, *, complete: bool = False
    ) -> RunState | None:
        """The newest finished run of ``crawl`` (started before ``before_run_id``; only complete ones, if asked)."""
        ...

    def recent_runs(self, crawl: str, limit: int) -> list[RunState]:
        """The crawl's last ``limit`` runs, newest first."""
        ...

    def set_seeds(self, crawl: str, run_id: str, seeds: int) -> None:
        """Record how many seed URLs the run's frontier holds (planned before any is sent)."""
        ...

    def fanned_out(self, crawl: str, run_id: str, offset: int) -> None:
        """Record how many seed tasks the fan-out has sent (a resumed fan-out continues from there)."""
        ...

    def seeded(self, crawl: str, run_id: str) -> RunState | None:
        """Mark the fan-out complete; the run as it then stands (None if there is no such run)."""
        ...

    def checked(self, crawl: str, run_id: str, done: int) -> None:
        """Note that the finalizer found the run not drained just now, with ``done`` URLs done."""
        ...

    def begin_finalizing(self, crawl: str, run_id: str) -> bool:
        """Move a running run to finalizing; False if someone else already did (finalizing is once)."""
        ...

    def finish(self, crawl: str, run_id: str, *, healthy: bool, complete: bool, records: int, summary_key: str) -> None:
        """Record the verdict and release the crawl's lock (only if this run still holds it)."""
        ...

    def reextracted(self, crawl: str, run_id: str, *, spec_digest: str, healthy: bool, records: int) -> bool:
        """Record a finished run's records rebuilt with another spec (its digest, verdict, record count);
        False if the run is not finished."""
        ...


@dataclass(frozen=True, slots=True)
class Claims:
    """What one claim call did: the links it claimed, and the new ones refused because the run is full."""

    won: list[UrlTask] = field(default_factory=list)
    capped: list[UrlTask] = field(default_factory=list)
    """New links left out because the run holds ``max_pages`` URLs: the crawl was cut short."""


class Frontier(Protocol):
    """A run's URLs: links claimed by the pages that found them, and each URL's one counting write."""

    def entries(self, run_id: str, url_hashes: Sequence[str]) -> dict[str, UrlEntry]:
        """What the run holds for these URLs (claimed or done), by URL hash; unknown ones absent."""
        ...

    def by_prefix(self, run_id: str, prefixes: Sequence[str]) -> dict[str, UrlEntry]:
        """The run's done URLs whose hash starts with each 16-hex prefix (how a claim names its parent), read
        strongly consistent, by prefix; a prefix no done URL has is absent."""
        ...

    def claim(self, run_id: str, tasks: Sequence[UrlTask], *, seeds: int, max_pages: int) -> Claims:
        """Claim new links, each with one conditional write: the ones this call claimed, and the ones
        refused for room.

        The run's frontier stays within ``max_pages`` (``seeds`` plus claimed links): exactly
        where the store can count in the same transaction, approximately otherwise.
        """
        ...

    def complete(self, run_id: str, results: Sequence[PageResult]) -> list[bool]:
        """Write each URL's result if it is not done yet; True where this call counted it."""
        ...

    def replace(self, run_id: str, results: Sequence[PageResult]) -> int:
        """Overwrite the results of URLs already done (``sluice reextract``'s new records); how many were.

        Never on the per-page path: a finished run's results change only when its records are rebuilt."""
        ...

    def scan(self, run_id: str, *, consistent: bool = True, shard: Shard | None = None) -> Iterator[UrlEntry]:
        """Every URL entry of a run (of one finalize shard's hash range), in URL-hash order (strongly consistent
        reads unless told otherwise)."""
        ...

    def scan_sized(self, run_id: str, *, shard: Shard | None = None) -> Iterator[tuple[UrlEntry, int]]:
        """:meth:`scan` (strongly consistent), each entry with its :meth:`stored_bytes`: what the finalizer's scan
        counts, read so a store that holds the item's attributes sizes them as read, not encoded again."""
        ...

    def held_digests(self, run_id: str, *, shard: Shard | None = None) -> Iterator[bytes]:
        """The record digests of every URL of a finished run whose records its output holds (fetched or reused,
        at least one record), in URL-hash order, ``b""`` where the page kept none (eventually consistent reads):
        what the finalizer reads of the catalog run, so a store that keeps them apart reads nothing else."""
        ...

    def add_progress(self, run_id: str, delta: Progress) -> None:
        """Report a batch's progress (once per batch)."""
        ...

    def stored_bytes(self, run_id: str, entry: UrlEntry) -> int:
        """The entry's item size on DynamoDB: what the run's cost estimate prices its writes and reads by,
        whichever store ran the crawl."""
        ...

    def progress(self, run_id: str) -> Progress: ...


class WorkQueue(Protocol):
    """The frontier queue: URL tasks packed into messages."""

    def send(self, crawl: str, run_id: str, tasks: Sequence[UrlTask]) -> int:
        """Enqueue tasks; return the number of messages sent."""
        ...

    def return_after(self, receipt: str, delay_s: int) -> None:
        """Make a received message visible again after ``delay_s`` seconds (retries, malformed bodies)."""
        ...

    def receive_more(self, run_id: str, limit: int) -> list[QueuedMessage]:
        """Up to ``limit`` more messages, of groups nobody holds, for a batch with concurrency to spare.

        The fetcher deletes those it finishes (the event source deletes only its own batch). SQS
        gives any run's messages; the local queue keeps to ``run_id`` (see its module)."""
        ...

    def delete(self, receipts: Sequence[str]) -> None:
        """Delete received messages that are done (those :meth:`receive_more` gave)."""
        ...


class ObjectWriter(Protocol):
    """A large object written in pieces: visible only once closed."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    @property
    def size(self) -> int: ...


class ObjectStore(Protocol):
    """Objects by key: parts, run outputs, summaries."""

    def put(self, key: str, body: bytes, content_type: str) -> None: ...

    def put_new(self, key: str, body: bytes, content_type: str) -> bool:
        """Write the object only if there is none at ``key``; True if this call wrote it."""
        ...

    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is no such object."""
        ...

    def size(self, key: str) -> int | None:
        """The object's size in bytes, or None if there is no such object."""
        ...

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start``; raise :class:`~sluice.domain.errors.Missing` if there is no such object."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object if there is one (``sluice reextract``'s output files the rebuilt manifest no longer
        lists; no function deletes anything)."""
        ...

    def writer(self, key: str, content_type: str) -> ObjectWriter: ...

    def location(self, key: str) -> str:
        """Where a person finds the object (an ``s3://`` URL, or a local path)."""
        ...


class HostBook(Protocol):
    """What the fleet knows of each target host between batches (spacing, pause, throttle, breaker).

    One fetcher at a time holds a host (its queue group), so a host's state has one writer; a write
    that finds the stored version changed (a batch that outlived its visibility) is dropped.
    """

    def load(self, hosts: Sequence[str]) -> dict[str, HostState]:
        """The stored state of these hosts (strongly consistent); hosts never stored are absent."""
        ...

    def save(self, states: Sequence[HostState]) -> int:
        """Write each state whose stored version is still the one it was read at; return how many were."""
        ...


class ShardTasks(Protocol):
    """Queued finalize shard tasks (on AWS: an SQS queue feeding the finalizer, and a completion set per phase)."""

    def start(self, attempt: Mapping[str, object], phase: str) -> None:
        """Send one task per shard of the attempt's phase."""
        ...

    def done(self, attempt: Mapping[str, object], phase: str, shard: int, count: int) -> bool:
        """Record shard ``shard`` of the phase done; True for the one call that makes the phase whole (a retried
        shard is never counted twice), and again for a retry of a task whose completion was recorded but
        whose phase was never moved on."""
        ...


class RecordsTable(Protocol):
    """The current record of every key, for specs that ask for it (``output.records_table``)."""

    def upsert(self, crawl: str, run_id: str, records: Sequence[Record]) -> None: ...

    def get(self, crawl: str, key: str, type_: str | None = None) -> Mapping[str, object] | None:
        """A key's current record (of page type ``type_``, for a spec with ``types``: keys are per type)."""
        ...


class SecretSource(Protocol):
    """Secrets by name, as the spec's ``request`` section names them (``sluice.domain.secrets``).

    Secrets Manager and SSM when deployed, environment variables locally. The caller reads each
    name once per container and keeps the value; an adapter never logs one.
    """

    def read(self, name: str) -> str:
        """The secret's value; raise :class:`~sluice.domain.secrets.SecretUnavailable` naming it, never its value."""
        ...

"""A URL's life in one run: where it came from, what the last run knew of it, and how it ended.

A :class:`PageResult` is written once per URL per run (the one conditional write that counts
it); everything the finalizer, the verdict and the next run need is in it, so nothing else on
the per-page path writes to a table.
"""

from __future__ import annotations

import hashlib
import operator
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Outcome = Literal["fetched", "not_modified", "not_due", "failed", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("fetched", "not_modified", "not_due", "failed", "skipped")
"""``not_due``: a sitemap said the page had not changed since its last successful fetch, or the spec's recrawl
schedule said its interval had not run out (:data:`BY_SCHEDULE`), so it was not requested at all; its records
are reused as a 304's are."""
BY_SCHEDULE = "schedule"
"""The reason of a page not due by the recrawl schedule (a page not due by its sitemap's lastmod has none)."""
Origin = Literal["seed", "link"]
"""A seed is enqueued by the scheduler (the spec's seeds and every page the catalog run knew);
a link is claimed by the page that found it."""

DIGEST_BYTES = 8
RECORD_DIGEST_BYTES = 2 * DIGEST_BYTES
"""Per record: an 8-byte digest of its key, then an 8-byte digest of its content."""
MAX_DIGESTS = 2_000
"""Records whose digests a result keeps (32 KB): a page with more is classified as all new next run,
and its result item stays far inside DynamoDB's 400 KB."""
MAX_URL = 2048
"""The longest URL a run visits (what browsers and most servers handle): longer seeds are refused
when the spec is checked, longer links are dropped and counted."""
MAX_REASON = 300
"""Characters of a failure or skip reason a result keeps (a reason can quote a URL a site chose)."""
MAX_CARRIED_INLINE_BYTES = 16 * 1024
"""What a result keeps inline of the data its page carried along its links, as JSON. A larger map (a listing of
more than about 300 cards carrying a price) goes whole into the batch's part, and the result points at it
(``carried_block``): no link is left out, and the item stays far inside DynamoDB's 400 KB.
16 KB: a listing of 100 cards carrying two fields is about 5 KB."""
GONE_STATUSES = frozenset({404, 410})
"""A page that answers these leaves the catalog: the next run does not seed it again."""


def url_hash(url: str) -> str:
    """A fixed-length key for a canonical URL (DynamoDB sort keys stop at 1,024 bytes; URLs don't)."""
    return hashlib.sha256(url.encode()).hexdigest()[:40]


def url_number(hash_hex: str) -> int:
    """The first 64 bits of a URL hash as an integer: what the frontier set holds, in hash order."""
    return int(hash_hex[:16], 16)


_BLAKE2B = hashlib.blake2b(digest_size=DIGEST_BYTES)
"""A hasher set up for :func:`digest`, never fed: each digest starts from a copy (1.6 µs a digest; building one
from its parameters each time, 2.5)."""


def digest(text: str) -> bytes:
    """An 8-byte digest: enough to tell a page's records apart, never trusted to dedupe alone."""
    hasher = _BLAKE2B.copy()
    hasher.update(text.encode("utf-8", "surrogatepass"))
    return hasher.digest()


def record_digest(key: str, content: str) -> bytes:
    """One record's :data:`RECORD_DIGEST_BYTES`: its key's digest, then its content hash's."""
    of_key = _BLAKE2B.copy()
    of_key.update(key.encode("utf-8", "surrogatepass"))
    of_content = _BLAKE2B.copy()
    of_content.update(content.encode("utf-8", "surrogatepass"))
    return of_key.digest() + of_content.digest()


def record_digests(pairs: Iterable[tuple[str, str]]) -> bytes:
    """``(key, content_hash)`` pairs packed as :data:`RECORD_DIGEST_BYTES` each."""
    return b"".join(record_digest(key, content) for key, content in pairs)


def key_numbers(packed: bytes) -> array[int]:
    """The key digests of packed record digests (:data:`RECORD_DIGEST_BYTES` each) as integers, in order: one
    array built from the bytes, no Python step per record (what ``int.from_bytes`` of each key's 8 bytes is)."""
    whole = len(packed) - len(packed) % RECORD_DIGEST_BYTES
    numbers = array("Q")
    numbers.frombytes(packed[:whole] if whole != len(packed) else packed)
    if _LITTLE:
        numbers.byteswap()  # the digests are big-endian
    keys = numbers[::2]
    if whole != len(packed):  # a cut record (never written so): its key's bytes that are there, as before
        keys.append(int.from_bytes(packed[whole : whole + DIGEST_BYTES], "big"))
    return keys


_LITTLE = sys.byteorder == "little"


def unpack_digests(packed: bytes) -> dict[bytes, bytes]:
    """Key digest to content digest, as :func:`record_digests` packed them."""
    size = RECORD_DIGEST_BYTES
    return {packed[i : i + DIGEST_BYTES]: packed[i + DIGEST_BYTES : i + size] for i in range(0, len(packed), size)}


def classify_digests(digests: Sequence[bytes], prior: bytes) -> tuple[int, int, list[int]]:
    """A page's records, each as :func:`record_digest` gives it, against the digests the catalog run packed of the
    page (``prior``): how many are new, how many changed, and the positions of both, in order.

    A page the catalog run had no digests of (a first crawl, a page new to it) is all new, and nothing is looked up.
    """
    if not prior:
        return len(digests), 0, list(range(len(digests)))
    before = unpack_digests(prior)
    new = changed = 0
    positions: list[int] = []
    for position, both in enumerate(digests):
        old = before.get(both[:DIGEST_BYTES])
        if old is None:
            new += 1
            positions.append(position)
        elif old != both[DIGEST_BYTES:]:
            changed += 1
            positions.append(position)
    return new, changed, positions


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """Where a page's response is in the raw archive: one WARC record, a byte range of one run's archive file.

    The run is the one that fetched the response: a page reused since (a 304, not due) keeps the
    reference of the fetch its records come from, so every counted page's bytes stay reachable."""

    run_id: str
    file: str
    offset: int
    length: int

    def to_text(self) -> str:
        """``RUN/FILE/OFFSET/LENGTH``: what a task and a result carry (under :data:`MAX_ARCHIVE_REF` characters)."""
        return f"{self.run_id}/{self.file}/{self.offset}/{self.length}"

    @classmethod
    def from_text(cls, text: str) -> ArchiveRef:
        run_id, file, offset, length = text.split("/")
        return cls(run_id, file, int(offset), int(length))


MAX_ARCHIVE_REF = 96
"""Characters of an archive reference: a run id (22), a file id (32), two numbers and three slashes."""


@dataclass(frozen=True, slots=True)
class Prior:
    """What the catalog run (the crawl's last finished run) knew of a page; it travels in the task."""

    etag: str | None = None
    last_modified: str | None = None
    body_hash: str | None = None
    records: int = 0
    digests: bytes = b""
    """The records the page had, as :func:`record_digests` packs them: tells new, changed, unchanged."""
    reused: bool = False
    """True when the page's records are in the catalog run's output, so a 304 can reuse them."""
    fetched_at: int | None = None
    """When the page was last fetched successfully (a 200 or a 304), in epoch seconds; None if never."""
    interval: int | None = None
    """Its recrawl interval in seconds (a spec with ``recrawl``): asked again once this long after ``fetched_at``."""
    archive: ArchiveRef | None = None
    """Where the response its records come from is archived (``output.archive``): a reused page keeps it."""

    @property
    def reusable(self) -> bool:
        """Whether a reuse (a 304, the same body again, a sitemap's lastmod) can stand for the page's records."""
        return self.reused or self.records == 0

    def not_due(self, lastmod: int | None) -> bool:
        """True when a sitemap's ``lastmod`` (the latest second it can mean) is before the page's last
        successful fetch and a reuse can stand for its records: then the page is not requested at all.

        The same second is not "before": a page changed in the second it was fetched is fetched again.
        """
        return lastmod is not None and self.fetched_at is not None and lastmod < self.fetched_at and self.reusable


@dataclass(frozen=True, slots=True)
class PartBlock:
    """A byte range of one of this run's part objects: a fetched page's records, or the map a page carried along
    its links."""

    part: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class RecordCounts:
    """A page's records against the ones the catalog run had: new, changed and unchanged by key."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0

    @property
    def total(self) -> int:
        return self.new + self.changed + self.unchanged


@dataclass(frozen=True, slots=True)
class PageResult:
    """How one URL ended in one run: the single write that counts it, and the next run's catalog entry."""

    url: str
    depth: int
    origin: Origin
    outcome: Outcome
    reason: str | None = None
    status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    body_hash: str | None = None
    counts: RecordCounts = field(default_factory=RecordCounts)
    items: int = 0
    missing: Mapping[str, int] = field(default_factory=dict)
    rejected: Mapping[str, int] = field(default_factory=dict)
    digests: bytes = b""
    block: PartBlock | None = None
    """Fetched with records: where they are. Not modified with records: None, and ``reused``."""
    reused: bool = False
    """The records are the catalog run's, reused without a fetch (a 304, or an identical body)."""
    ms: int = 0
    """How long the visit waited on the site (its share of the fetcher's time, for the cost estimate)."""
    dropped_links: int = 0
    """In-scope links left out because no task can hold them (longer than a URL a task takes)."""
    fallback_keys: int = 0
    """Records whose key fell back from the one ``extract.key`` names (a key field was missing)."""
    capped_links: int = 0
    """New links this page found that the run left out because it held ``follow.max_pages`` URLs."""
    beyond_depth: int = 0
    """Links of this page (at ``follow.max_depth``) the run did not know, not followed."""
    fetched_at: int | None = None
    """Epoch seconds of the page's last successful fetch: this run's (a 200 or a 304), or, for a page not
    due, the one its reused records come from. What the next run compares a sitemap's lastmod with."""
    type: str | None = None
    """The page's type (a spec with ``types``): whose counts, null rates and record-count check it joins."""
    via: str | None = None
    """The follow rule whose link led here (a spec with ``types``): the next run's task says it again, so the
    page is taken for the same type when it is seeded from the catalog."""
    carry: Mapping[str, Any] | None = None
    """What the linking page carried here (merged into the page's records): the next run's task carries it."""
    parent: str | None = None
    """For a page data was carried to: the linking page that carried it (16 hex of its URL hash, as a claim names
    it), so the next run's task can take that page's data of its run (``carried_by_link``)."""
    carried_by_link: Mapping[str, Mapping[str, Any]] | None = None
    """What this page carried along each of its links, by the linked URL's hash prefix (16 hex, as a claim names
    its parent): a page seeded from the catalog takes its carried fields from here when its linking page was
    extracted earlier in the run, so a value that changed on the listing reaches it. Inline up to
    :data:`MAX_CARRIED_INLINE_BYTES`; a larger map is in the part, at ``carried_block``
    (:mod:`sluice.pipeline.visit.carried`)."""
    carried_block: PartBlock | None = None
    """Where ``carried_by_link`` is when it is too large to keep inline: one JSON line of the batch's part."""
    carry_stale: bool = False
    """A page seeded from the catalog with carried data whose linking page could not give this run's (not visited
    yet, failed, its map unreadable): its records keep the catalog's carried values, and the run counts it."""
    carry_dropped: Mapping[str, int] = field(default_factory=dict)
    """Carried fields this page left out of its links' data, by field: over the bytes a task holds
    (:data:`~sluice.spec.models.MAX_CARRY_BYTES`), each counted once per link."""
    interval: int | None = None
    """Seconds until the page is asked again, from ``fetched_at`` (:mod:`sluice.domain.recrawl`); None without
    ``recrawl`` in the spec."""
    archive: ArchiveRef | None = None
    """Where the response this page's records come from is archived: this run's fetch, or, for a reused page,
    the fetch its records come from (``output.archive``; None when it was off)."""
    proxy: str | None = None
    """With ``request.proxies``: the proxy that carried the page's answer (its spec name, never its address)."""
    proxy_tier: int | None = None
    proxy_failures: tuple[tuple[str, str, bool], ...] = ()
    """Proxies that failed the page's requests: name, reason, and whether that ejected the proxy for the run."""

    @property
    def records(self) -> int:
        return self.counts.total

    def but(self, **changes: Any) -> PageResult:
        """``dataclasses.replace(self, **changes)``, in 10 µs instead of 17: a visit's result is remade twice a
        page (its timing and type, then its block in the part), and ``replace`` reads each of the 33 fields by name."""
        values = list(_RESULT_VALUES(self))
        try:
            for name, value in changes.items():
                values[_RESULT_FIELDS[name]] = value
        except KeyError as exc:
            raise TypeError(f"PageResult has no field {exc.args[0]!r}") from None
        return PageResult(*values)

    @property
    def holds_records(self) -> bool:
        """The page's records are this run's: it was fetched, or reused (not modified, not due)."""
        return self.outcome in ("fetched", "not_modified", "not_due")

    @property
    def gone(self) -> bool:
        return self.outcome == "failed" and self.status in GONE_STATUSES

    def prior(self) -> Prior:
        """What the next run's task carries for this page."""
        return Prior(
            etag=self.etag,
            last_modified=self.last_modified,
            body_hash=self.body_hash,
            records=self.records,
            digests=self.digests,
            reused=self.holds_records and self.records > 0,
            fetched_at=self.fetched_at,
            interval=self.interval,
            archive=self.archive if self.holds_records else None,
        )


_RESULT_FIELDS = {f.name: n for n, f in enumerate(fields(PageResult))}
"""Each field of a result by its position in ``PageResult(...)``'s arguments (every field is one)."""
_RESULT_VALUES = operator.attrgetter(*_RESULT_FIELDS)
_RESULT_SLOTS = tuple(getattr(PageResult, name).__set__ for name in _RESULT_FIELDS)
"""Each field's slot setter, in ``PageResult(...)``'s argument order."""


def result_of_values(values: Sequence[Any]) -> PageResult:
    """``PageResult(*values)``, every field given by position, in 2.4 µs instead of 6: the generated ``__init__``
    of a frozen dataclass sets each of its 35 fields through ``object.__setattr__``; this sets each slot directly.
    For a store's read of a run's results (the finalizer decodes one a URL); no check or default is skipped, as
    ``PageResult`` has no ``__post_init__`` and every field is given."""
    result = object.__new__(PageResult)
    for put, value in zip(_RESULT_SLOTS, values, strict=True):
        put(result, value)
    return result


@dataclass(frozen=True, slots=True)
class UrlEntry:
    """A URL of a run as its store holds it: claimed and waiting (``result`` None) or done."""

    url_hash: str
    url: str
    depth: int
    origin: Origin
    parent: str | None
    """The first 16 hex characters of the claiming page's URL hash (links only)."""
    result: PageResult | None
    via: str | None = None
    """The follow rule whose link was claimed (a spec with ``types``), as the claim keeps it."""
    carry: Mapping[str, Any] | None = None
    """What the claiming page carried along the link, as the claim keeps it (sent again with the link)."""

    @property
    def done(self) -> bool:
        return self.result is not None

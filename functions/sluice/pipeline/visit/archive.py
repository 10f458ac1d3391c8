"""The raw archive: every response a batch fetched, kept as WARC so a run's records can be rebuilt without the site.

A spec with ``output.archive`` has each fetcher write one gzipped WARC file per batch
(``archive/crawl=NAME/run=ID/FILE.warc.gz``, :func:`~sluice.domain.layout.archive_key`), before
its part and before any result: a file nobody's result references (its batch died, or lost to a
duplicate) is never read, as an unreferenced part is not. Each page's record is compressed as
it completes, into its own gzip member, so the batch holds compressed bytes only and one range
read of a result's :class:`~sluice.domain.pages.ArchiveRef` is one whole, valid WARC record.

What a record holds: a ``response`` record with the status line, the headers the fetch layer
keeps (Content-Type, ETag, Last-Modified, and a Content-Length for the body as stored) and the
body **as decoded** from its transfer and content encodings (the fetch layer inflates gzip under
its body cap; the compressed bytes are not kept). ``WARC-Target-URI`` is the URL the body came
from (after redirects); three extension headers say what the task knew that extraction needs:
the URL the run counts the page under, the follow rule that led there (page types) and the fields
carried to it (JSON).
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from sluice.domain.layout import archive_key
from sluice.domain.pages import ArchiveRef
from sluice.fetch.outcomes import Fetched
from sluice.messages import UrlTask
from sluice.ports import ObjectStore

FILE_BYTES = 32 * 1024 * 1024
"""A batch's archive is written out as a file once it holds this much (compressed): a batch's memory stays
under it plus the bodies in flight, whatever the bodies; a batch of small pages writes one file."""
GZIP_LEVEL = 6
"""zlib's default: warcio's own gzip writer takes 9, about 13 % more time for 0.6 % fewer bytes on the demo's pages."""
URL_HEADER, VIA_HEADER, CARRY_HEADER = "WARC-Sluice-URL", "WARC-Sluice-Via", "WARC-Sluice-Carry"
MAX_RECORD_BYTES = 101 * 1024 * 1024
"""The longest range a reference may name: a body at the largest cap a spec may set (100 MiB) and its headers."""
_REASONS = {200: "OK", 203: "Non-Authoritative Information", 206: "Partial Content"}


class ArchiveUnreadable(ValueError):
    """An archive reference that does not lead to a response record (the file expired, or is not WARC)."""


@dataclass(frozen=True, slots=True)
class ArchivedResponse:
    """One archived page, as extraction takes it again."""

    url: str
    """The URL the run counts the page under (the task's)."""
    final_url: str
    status: int
    content_type: str
    body: bytes
    via: str | None = None
    carry: dict[str, Any] | None = None


class BatchArchive:
    """A batch's WARC file, written record by record as pages complete (thread-safe: the batch writes it out from
    a thread while pages may still complete on the event loop)."""

    def __init__(self, crawl: str, run_id: str) -> None:
        self.crawl, self.run_id = crawl, run_id
        self._lock = threading.Lock()
        self._open()
        self.files = 0
        self.written = 0
        """Compressed bytes written out so far (for the batch's log line)."""
        self.seconds = 0.0
        """Time spent making records and writing files (the archive's share of the batch, in its log line)."""
        self.failed: BaseException | None = None
        """A file that could not be written: results point into it, so the batch must not count (see flush)."""

    def _open(self) -> None:
        self.file_id = uuid.uuid4().hex
        self._buffer = io.BytesIO()

    @property
    def full(self) -> bool:
        return self._buffer.tell() >= FILE_BYTES

    def add(self, task: UrlTask, outcome: Fetched) -> ArchiveRef:
        """Append the page's response record; where it is."""
        headers = [("Content-Type", outcome.content_type), ("Content-Length", str(len(outcome.body)))]
        if outcome.validators.etag:
            headers.append(("ETag", outcome.validators.etag))
        if outcome.validators.last_modified:
            headers.append(("Last-Modified", outcome.validators.last_modified))
        status = f"{outcome.status} {_REASONS.get(outcome.status, 'OK')}"
        http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
        extra = {URL_HEADER: task.url}
        if task.via is not None:
            extra[VIA_HEADER] = task.via
        if task.carry:
            extra[CARRY_HEADER] = json.dumps(task.carry, separators=(",", ":"), ensure_ascii=True)
        started = time.perf_counter()
        plain = io.BytesIO()
        writer = WARCWriter(plain, gzip=False)
        record = writer.create_warc_record(
            outcome.final_url,
            "response",
            payload=io.BytesIO(outcome.body),
            length=len(outcome.body),
            http_headers=http,
            warc_headers_dict=extra,
        )
        writer.write_record(record)
        # One gzip member a record (what warcio writes, at zlib's default level): a range read is one record.
        gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        member = gzip.compress(plain.getbuffer()) + gzip.flush()
        with self._lock:
            start = self._buffer.tell()
            self._buffer.write(member)
            self.seconds += time.perf_counter() - started
            return ArchiveRef(self.run_id, self.file_id, start, len(member))

    def flush(self, objects: ObjectStore) -> str | None:
        """Write what the archive holds as one file (before any part or result refers to it); its key, if any.

        A file that fails to be written fails every later flush too: pages already hold references into it,
        so the batch's last flush (before its part) raises and nothing of the batch is counted."""
        if self.failed is not None:
            raise self.failed
        started = time.perf_counter()
        with self._lock:
            data = self._buffer.getvalue()
            key = archive_key(self.crawl, self.run_id, self.file_id)
            if not data:
                return None
            self._open()
        try:
            objects.put(key, data, "application/warc")
        except BaseException as exc:
            self.failed = exc
            raise
        self.files += 1
        self.written += len(data)
        self.seconds += time.perf_counter() - started
        return key


def read_response(
    objects: ObjectStore, crawl: str, ref: ArchiveRef, sizes: dict[str, int | None] | None = None
) -> ArchivedResponse:
    """The response an archive reference names: one range read, one record parsed.

    ``sizes`` remembers each file's size between calls (one HEAD a file, not a page)."""
    key = archive_key(crawl, ref.run_id, ref.file)
    if not 0 < ref.length <= MAX_RECORD_BYTES:
        raise ArchiveUnreadable(f"{key}: a reference of {ref.length} bytes names no record this archive writes")
    sizes = {} if sizes is None else sizes
    if key not in sizes:
        sizes[key] = objects.size(key)
    size = sizes[key]
    if size is None:
        raise ArchiveUnreadable(f"archive file {key} is gone (expired, or never written)")
    if ref.offset + ref.length > size:
        raise ArchiveUnreadable(f"{key}: the reference ends past the file's {size} bytes")
    return parse_record(objects.get_range(key, ref.offset, ref.length), key)


def parse_record(data: bytes, where: str = "archive") -> ArchivedResponse:
    """The first record of ``data`` (one gzip member), which must be a response record."""
    try:
        for record in ArchiveIterator(io.BytesIO(data)):
            if record.rec_type != "response" or record.http_headers is None:
                break
            head = record.rec_headers
            url = head.get_header(URL_HEADER) or head.get_header("WARC-Target-URI")
            carry = head.get_header(CARRY_HEADER)
            return ArchivedResponse(
                url=url,
                final_url=head.get_header("WARC-Target-URI"),
                status=int(record.http_headers.get_statuscode()),
                content_type=record.http_headers.get_header("Content-Type") or "text/html",
                body=record.content_stream().read(),
                via=head.get_header(VIA_HEADER),
                carry=json.loads(carry) if carry else None,
            )
    except Exception as exc:  # warcio raises several kinds for a range that is no record
        raise ArchiveUnreadable(f"{where}: no WARC response record at the referenced range ({exc})") from exc
    raise ArchiveUnreadable(f"{where}: the referenced range is no WARC response record")

"""Run outputs in S3.

- ``pages/crawl=NAME/run=ID/URL_HASH.jsonl``: each page's records, keyed by the page's URL
  hash, so a redelivered or regrouped batch rewrites the same keys with the same lines, never
  a second copy. Working data: a lifecycle rule expires it.
- ``runs/crawl=NAME/run=ID/records.jsonl`` and ``summary.json``: the run's output, streamed
  together from the page objects at finalization with each record key once.
"""

from __future__ import annotations

import io
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from sluice.aws.clients import client
from sluice.aws.ledger import url_hash
from sluice.extraction.extract import Record, record_line

_PART_BYTES = 16 * 1024 * 1024  # multipart parts: S3 wants >= 5 MiB; bounded memory either way


PAGES_PREFIX = "pages/"
RUNS_PREFIX = "runs/"


def run_prefix(crawl: str, run_id: str) -> str:
    """Where a run's output lives (Athena/Glue can partition on ``crawl`` and ``run``)."""
    return f"{RUNS_PREFIX}crawl={crawl}/run={run_id}/"


def pages_prefix(crawl: str, run_id: str) -> str:
    return f"{PAGES_PREFIX}crawl={crawl}/run={run_id}/"


class RunObjects:
    """A run's objects in one bucket."""

    def __init__(self, bucket: str, *, readers: int = 16) -> None:
        self.bucket = bucket
        self._s3 = client("s3")
        self._readers = readers

    def page_key(self, crawl: str, run_id: str, url: str) -> str:
        return f"{pages_prefix(crawl, run_id)}{url_hash(url)}.jsonl"

    def records_key(self, crawl: str, run_id: str) -> str:
        return f"{run_prefix(crawl, run_id)}records.jsonl"

    def summary_key(self, crawl: str, run_id: str) -> str:
        return f"{run_prefix(crawl, run_id)}summary.json"

    def put_page(self, crawl: str, run_id: str, url: str, records: Sequence[Record]) -> str:
        """Write one page's records (deterministic key: a rewrite replaces, never duplicates)."""
        key = self.page_key(crawl, run_id, url)
        body = "".join(record_line(r) for r in records).encode()
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        return key

    def carry_page(self, source_key: str, crawl: str, run_id: str, url: str) -> str | None:
        """Copy a not-modified page's records from the run that fetched them into this run (server side)."""
        key = self.page_key(crawl, run_id, url)
        if source_key == key:
            return key
        try:
            self._s3.copy_object(Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": source_key})
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
        return key

    def put_summary(self, crawl: str, run_id: str, summary: dict[str, Any]) -> str:
        key = self.summary_key(crawl, run_id)
        body = json.dumps(summary, indent=2, sort_keys=True).encode()
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")
        return key

    def _page_keys(self, crawl: str, run_id: str) -> Iterator[str]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=pages_prefix(crawl, run_id)
        )
        for page in pages:
            for obj in page.get("Contents", []):
                yield obj["Key"]

    def _read(self, key: str) -> bytes:
        body: bytes = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def compact(self, crawl: str, run_id: str) -> tuple[str, int]:
        """Stream every page object into ``records.jsonl``, each record key once; return its key and line count."""
        key = self.records_key(crawl, run_id)
        seen: set[str] = set()
        upload = _Upload(self._s3, self.bucket, key)
        lines = 0
        try:
            with ThreadPoolExecutor(max_workers=self._readers) as pool:
                for body in _bounded_map(pool, self._read, self._page_keys(crawl, run_id), self._readers * 2):
                    for line in body.splitlines():
                        if not line:
                            continue
                        record_key = json.loads(line)["_key"]
                        if record_key in seen:
                            continue
                        seen.add(record_key)
                        upload.write(line + b"\n")
                        lines += 1
            upload.close()
        except BaseException:
            upload.abort()
            raise
        return key, lines

    def read_lines(self, key: str) -> list[dict[str, Any]]:
        """An object's JSON lines (for tests and the local runner's small outputs)."""
        return [json.loads(line) for line in self._read(key).splitlines() if line]


def _bounded_map(
    pool: ThreadPoolExecutor, fn: Callable[[str], bytes], keys: Iterable[str], window: int
) -> Iterator[bytes]:
    """``pool.map`` in order, with at most ``window`` bodies in memory (``Executor.map`` reads ahead without limit)."""
    pending: deque[Future[bytes]] = deque()
    for key in keys:
        pending.append(pool.submit(fn, key))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


class _Upload:
    """A streaming upload: one PUT when small, multipart parts of bounded size when large."""

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        self._s3, self._bucket, self._key = s3, bucket, key
        self._buffer = io.BytesIO()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self._buffer.write(data)
        if self._buffer.tell() >= _PART_BYTES:
            self._flush_part()

    def _flush_part(self) -> None:
        if self._upload_id is None:
            self._upload_id = self._s3.create_multipart_upload(
                Bucket=self._bucket, Key=self._key, ContentType="application/x-ndjson"
            )["UploadId"]
        number = len(self._parts) + 1
        answer = self._s3.upload_part(
            Bucket=self._bucket,
            Key=self._key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=self._buffer.getvalue(),
        )
        self._parts.append({"ETag": answer["ETag"], "PartNumber": number})
        self._buffer = io.BytesIO()

    def close(self) -> None:
        if self._upload_id is None:
            self._s3.put_object(
                Bucket=self._bucket, Key=self._key, Body=self._buffer.getvalue(), ContentType="application/x-ndjson"
            )
            return
        if self._buffer.tell():
            self._flush_part()
        self._s3.complete_multipart_upload(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}
        )

    def abort(self) -> None:
        if self._upload_id is not None:
            self._s3.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)

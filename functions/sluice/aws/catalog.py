"""The catalog in DynamoDB: each crawl's records and what it knows of each page, across runs.

Layout (``pk``, ``sk``):

- ``page#CRAWL`` / ``URL_HASH``: validators, body hash, record count and the S3 object of the
  page's records as last fetched, so the next run can ask "changed since?" and, on a 304,
  carry the page's records into its own output without fetching them;
- ``rec#CRAWL`` / ``RECORD_KEY`` (hashed when long): a record's latest content and hash.

A record write is one conditional update that succeeds only when the content hash differs,
so an unchanged record costs no rewrite; who wrote it last and in which run tell new,
changed and unchanged apart, also when a redelivered page writes the same records again.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import ClientError

from sluice.aws.clients import client
from sluice.aws.items import from_item, to_item
from sluice.aws.ledger import url_hash
from sluice.extraction.extract import Record
from sluice.fetch.outcomes import Validators

Change = Literal["new", "changed", "unchanged"]
_MAX_SORT_KEY = 512
_MAX_LINKS_BYTES = 256 * 1024  # DynamoDB items stop at 400 KB


@dataclass(frozen=True, slots=True)
class PageState:
    """What the catalog remembers of a page from the last run that fetched it."""

    url: str
    validators: Validators
    content_hash: str | None
    records: int
    object_key: str | None
    run_id: str
    links: tuple[str, ...] = ()
    """The in-scope links the page had: a 304 still leads the crawl on to them."""


@dataclass(frozen=True, slots=True)
class RecordTally:
    new: int = 0
    changed: int = 0
    unchanged: int = 0


def _pack_links(links: Sequence[str]) -> bytes | None:
    """Links zlib-packed for a DynamoDB item, or None when they would not fit in one."""
    packed = zlib.compress("\n".join(links).encode(), 6)
    return packed if len(packed) <= _MAX_LINKS_BYTES else None


def _unpack_links(packed: Any) -> tuple[str, ...]:
    if not packed:
        return ()
    raw = packed.value if hasattr(packed, "value") else packed
    return tuple(link for link in zlib.decompress(bytes(raw)).decode().split("\n") if link)


def record_sort_key(key: str) -> str:
    """The record key itself when short enough, else a hash of it."""
    return key if len(key.encode()) <= _MAX_SORT_KEY else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class Catalog:
    """Pages and records of every crawl, in one DynamoDB table."""

    def __init__(self, table: str, *, writers: int = 16) -> None:
        self.table = table
        self._db = client("dynamodb")
        self._writers = writers

    def pages(self, crawl: str, urls: Iterable[str]) -> dict[str, PageState]:
        """What is known of ``urls``, by URL; unknown pages are absent."""
        keys = [to_item({"pk": f"page#{crawl}", "sk": url_hash(u)}) for u in dict.fromkeys(urls)]
        found: dict[str, PageState] = {}
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {self.table: {"Keys": keys[start : start + 100]}}
            for _ in range(10):
                answer = self._db.batch_get_item(RequestItems=request)
                for raw in answer["Responses"].get(self.table, []):
                    item = from_item(raw)
                    found[item["url"]] = PageState(
                        url=item["url"],
                        validators=Validators(item.get("etag"), item.get("last_modified")),
                        content_hash=item.get("content_hash"),
                        records=int(item.get("records", 0)),
                        object_key=item.get("object_key"),
                        run_id=item["run_id"],
                        links=_unpack_links(item.get("links_z")),
                    )
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
        return found

    def put_page(self, crawl: str, state: PageState) -> None:
        item = {
            "pk": f"page#{crawl}",
            "sk": url_hash(state.url),
            "url": state.url,
            "records": state.records,
            "run_id": state.run_id,
            **{
                k: v
                for k, v in (("etag", state.validators.etag), ("last_modified", state.validators.last_modified))
                if v
            },
            **({"content_hash": state.content_hash} if state.content_hash else {}),
            **({"object_key": state.object_key} if state.object_key else {}),
        }
        packed = _pack_links(state.links)
        if packed is not None:
            item["links_z"] = packed
        elif state.links:
            # Too many links to remember: without validators the next run fetches the page whole.
            item.pop("etag", None)
            item.pop("last_modified", None)
        self._db.put_item(TableName=self.table, Item=to_item(item))

    def write_records(self, crawl: str, run_id: str, page_url: str, records: Sequence[Record]) -> RecordTally:
        """Write a page's records, each only if its content changed; count new, changed and unchanged."""
        if not records:
            return RecordTally()
        with ThreadPoolExecutor(max_workers=min(self._writers, len(records))) as pool:
            changes = list(pool.map(lambda r: self._write(crawl, run_id, page_url, r), records))
        return RecordTally(changes.count("new"), changes.count("changed"), changes.count("unchanged"))

    def _write(self, crawl: str, run_id: str, page_url: str, record: Record) -> Change:
        digest = record.content_hash
        try:
            answer = self._db.update_item(
                TableName=self.table,
                Key=to_item({"pk": f"rec#{crawl}", "sk": record_sort_key(record.key)}),
                UpdateExpression=(
                    "SET record_key = :k, content_hash = :h, #d = :d, changed_run = :r, source_page = :p, "
                    "first_run = if_not_exists(first_run, :r)"
                ),
                # Only a new or different record is written: an unchanged one costs no rewrite.
                ConditionExpression="attribute_not_exists(pk) OR content_hash <> :h",
                ExpressionAttributeNames={"#d": "data"},
                ExpressionAttributeValues=to_item(
                    {
                        ":k": record.key,
                        ":h": digest,
                        ":d": json.dumps(record.data, ensure_ascii=False, sort_keys=True),
                        ":r": run_id,
                        ":p": page_url,
                    }
                ),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            old = from_item(exc.response.get("Item") or {})
            # Same content. If this run wrote it (a redelivered page), answer what that write answered.
            if old.get("changed_run") == run_id and old.get("source_page") == page_url:
                return "new" if old.get("first_run") == run_id else "changed"
            return "unchanged"
        return "changed" if answer.get("Attributes") else "new"

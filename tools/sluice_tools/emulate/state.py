"""Emulated state between runs: moto's tables and bucket, saved to a folder after a run and loaded before the next.

That is what lets a second local run send conditional requests and compare its record count
with the first, as a deployed crawl does.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from sluice.adapters.aws.clients import client
from sluice.settings import Settings


def _tables(settings: Settings) -> tuple[str, ...]:
    return (settings.ledger_table, *([settings.records_table] if settings.records_table else []))


def save(settings: Settings, folder: Path) -> None:
    """Write the tables (a run's URL entries included: the next run seeds from them) and every object."""
    ddb, s3 = client("dynamodb"), client("s3")
    (folder / "dynamodb").mkdir(parents=True, exist_ok=True)
    for table in _tables(settings):
        path = folder / "dynamodb" / f"{table}.jsonl"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            for page in ddb.get_paginator("scan").paginate(TableName=table):
                for item in page["Items"]:
                    out.write(json.dumps(_binary_as_text(item), sort_keys=True) + "\n")
        tmp.replace(path)
    root = folder / "s3"
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.bucket):
        for obj in page.get("Contents", []):
            target = root / obj["Key"]
            if target.exists() and target.stat().st_size == obj["Size"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=settings.bucket, Key=obj["Key"])["Body"].read())


def load(settings: Settings, folder: Path) -> int:
    """Restore what :func:`save` wrote; return the number of items and objects restored."""
    ddb, s3 = client("dynamodb"), client("s3")
    restored = 0
    for table in _tables(settings):
        path = folder / "dynamodb" / f"{table}.jsonl"
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as lines:
            batch: list[dict[str, object]] = []
            for line in lines:
                batch.append({"PutRequest": {"Item": _text_as_binary(json.loads(line))}})
                if len(batch) == 25:
                    _write(ddb, table, batch)
                    restored += len(batch)
                    batch = []
            if batch:
                _write(ddb, table, batch)
                restored += len(batch)
    root = folder / "s3"
    if root.exists():
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            s3.put_object(Bucket=settings.bucket, Key=path.relative_to(root).as_posix(), Body=path.read_bytes())
            restored += 1
    return restored


def _binary_as_text(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB binary values (``{"B": bytes}``) as base64 text, for a JSON file."""
    return {k: {"B64": base64.b64encode(v["B"]).decode()} if "B" in v else v for k, v in item.items()}


def _text_as_binary(item: dict[str, Any]) -> dict[str, Any]:
    return {k: {"B": base64.b64decode(v["B64"])} if "B64" in v else v for k, v in item.items()}


def _write(ddb: object, table: str, batch: list[dict[str, object]]) -> None:
    request = {table: batch}
    for _ in range(10):
        answer = ddb.batch_write_item(RequestItems=request)  # type: ignore[attr-defined]
        request = answer.get("UnprocessedItems") or {}
        if not request:
            return
    raise RuntimeError(f"could not restore {len(request.get(table, []))} items into {table}")


def object_path(folder: Path, key: str) -> Path:
    """Where an S3 object of a local run lives on disk."""
    return folder / "s3" / key

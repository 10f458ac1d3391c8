"""What the adapter tests share: moto with the ledger table the stack builds (``pk``/``sk``, on demand)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from moto import mock_aws

from sluice.adapters.aws import clients


@contextmanager
def moto_ledger(monkeypatch: pytest.MonkeyPatch, table: str, *, bucket: str | None = None) -> Iterator[None]:
    """moto, with fake credentials, the ledger table ``table`` and, if named, the bucket ``bucket``; the
    adapters' cached clients reset on the way in and out, so no test sees another's endpoint."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        clients.reset()
        clients.client("dynamodb").create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        if bucket is not None:
            clients.client("s3").create_bucket(Bucket=bucket)
        try:
            yield
        finally:
            clients.reset()

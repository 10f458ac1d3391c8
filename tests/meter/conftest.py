"""Fixtures for the meter: moto with fake credentials, botocore clients, a ledger-shaped table, items of exact sizes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.session import get_session
from moto import mock_aws

from sluice_tools.meter.dynamo_size import item_size

REGION = "us-east-1"
TABLE = "ledger"
Client = Any
"""A botocore client (botocore ships no type stubs)."""
Item = dict[str, dict[str, Any]]
SizedItem = Callable[..., Item]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Client]]:
    """moto for the test, and a factory of plain botocore clients in us-east-1 (nothing cached between tests)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        session = get_session()
        yield lambda service: session.create_client(service, region_name=REGION)


@pytest.fixture
def ddb(aws: Callable[[str], Client]) -> Client:
    """A DynamoDB client, with the ledger's key schema (``pk``, ``sk``) created as table ``ledger``."""
    client = aws("dynamodb")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def _sized_item(pk: str, sk: str, size: int) -> Item:
    """An item of exactly ``size`` bytes by DynamoDB's rules, padded with a string attribute."""
    item: Item = {"pk": {"S": pk}, "sk": {"S": sk}}
    padding = size - item_size(item) - len("pad")
    assert padding > 0, f"{size} bytes is too small for a padded item"
    item["pad"] = {"S": "x" * padding}
    assert item_size(item) == size
    return item


@pytest.fixture
def sized_item() -> SizedItem:
    """:func:`_sized_item` (test modules cannot import conftest under --import-mode=importlib)."""
    return _sized_item

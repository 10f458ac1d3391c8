"""A missing S3 key reads as None, also when S3 answers 403 to a role that may not list the whole bucket.

S3's answers are played by botocore's own Stubber (moto answers a missing key with 404 whatever
the caller may do): AccessDenied for a key that is not there, for one that is, and with the
listing refused as well.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.stub import Stubber

from sluice.adapters.aws import clients
from sluice.adapters.aws.objects import S3Objects
from sluice.domain.errors import Denied

BUCKET = "sluice-dev-records-123456789012-us-east-1"
KEY = "work/crawl=c/run=r/robots/abc.json"


@pytest.fixture
def objects(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[S3Objects, Stubber]]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    store = S3Objects(BUCKET)
    with Stubber(store._s3) as stub:
        yield store, stub
        stub.assert_no_pending_responses()
    clients.reset()


def _denied(stub: Stubber, operation: str) -> None:
    stub.add_client_error(operation, service_error_code="AccessDenied", http_status_code=403)


def test_a_403_for_a_key_the_listing_does_not_show_is_missing(objects: tuple[S3Objects, Stubber]) -> None:
    store, stub = objects
    _denied(stub, "get_object")
    stub.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": BUCKET, "Prefix": KEY, "MaxKeys": 1})
    assert store.get(KEY) is None


def test_a_403_for_a_key_that_is_there_is_a_refusal(objects: tuple[S3Objects, Stubber]) -> None:
    store, stub = objects
    _denied(stub, "get_object")
    stub.add_response("list_objects_v2", {"Contents": [{"Key": KEY}], "KeyCount": 1})
    with pytest.raises(Denied, match="AccessDenied"):
        store.get(KEY)


def test_a_403_with_the_listing_refused_too_is_a_refusal(objects: tuple[S3Objects, Stubber]) -> None:
    store, stub = objects
    _denied(stub, "head_object")
    _denied(stub, "list_objects_v2")
    with pytest.raises(Denied, match="AccessDenied"):
        store.size(KEY)


def test_a_404_is_missing_without_a_listing(objects: tuple[S3Objects, Stubber]) -> None:
    store, stub = objects
    stub.add_client_error("head_object", service_error_code="404", http_status_code=404)
    assert store.size(KEY) is None

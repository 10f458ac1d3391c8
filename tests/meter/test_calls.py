"""observe_calls: every call is heard before and after, a ``before`` can refuse a call, and the patch undoes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from sluice_tools.meter.calls import current_client, observe_calls

Client = Any


@dataclass
class Recorder:
    """Writes down what it hears; refuses operations named in ``refuse``."""

    refuse: frozenset[str] = frozenset()
    heard: list[tuple[str, str, str]] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    errors: list[BaseException | None] = field(default_factory=list)

    def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        self.heard.append(("before", service, operation))
        self.regions.append(current_client().meta.region_name)
        if operation in self.refuse:
            raise ClientError({"Error": {"Code": "Refused", "Message": "refused"}}, operation)

    def after(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        response: Mapping[str, Any] | None,
        error: BaseException | None,
        elapsed_s: float,
    ) -> None:
        assert (response is None) != (error is None)
        assert elapsed_s >= 0
        self.heard.append(("after", service, operation))
        self.errors.append(error)


@contextmanager
def locked_calls() -> Iterator[threading.RLock]:
    """Another wrapper of ``_make_api_call``, built like the local runner's ``serialized_calls``."""
    original = BaseClient._make_api_call
    lock = threading.RLock()

    def locked(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        with lock:
            return original(self, operation, params)

    BaseClient._make_api_call = locked
    try:
        yield lock
    finally:
        BaseClient._make_api_call = original


def test_observe_calls_restores_make_api_call_even_when_the_block_raises() -> None:
    original = BaseClient._make_api_call
    patched: list[object] = []

    def fail_inside() -> None:
        with observe_calls(Recorder()):
            patched.append(BaseClient._make_api_call)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert patched[0] is not original
    assert BaseClient._make_api_call is original


def test_observers_hear_each_call_before_and_after_in_order(aws: Callable[[str], Client]) -> None:
    first, second = Recorder(), Recorder()
    sqs = aws("sqs")
    with observe_calls(first, second):
        sqs.create_queue(QueueName="q")
        aws("dynamodb").list_tables()
    expected = [
        ("before", "sqs", "CreateQueue"),
        ("after", "sqs", "CreateQueue"),
        ("before", "dynamodb", "ListTables"),
        ("after", "dynamodb", "ListTables"),
    ]
    assert first.heard == expected
    assert second.heard == expected
    assert first.regions == ["us-east-1", "us-east-1"]


def test_after_hears_the_error_the_service_returned(ddb: Client) -> None:
    recorder = Recorder()
    with observe_calls(recorder), pytest.raises(ClientError):
        ddb.delete_item(
            TableName="ledger",
            Key={"pk": {"S": "a"}, "sk": {"S": "b"}},
            ConditionExpression="attribute_exists(pk)",
        )
    (error,) = recorder.errors
    assert isinstance(error, ClientError)
    assert error.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_a_before_that_raises_fails_the_call_unsent(aws: Callable[[str], Client]) -> None:
    sqs = aws("sqs")
    told, refusing, never_told = Recorder(), Recorder(refuse=frozenset({"CreateQueue"})), Recorder()
    with observe_calls(told, refusing, never_told), pytest.raises(ClientError, match="refused"):
        sqs.create_queue(QueueName="refused")
    assert sqs.list_queues().get("QueueUrls", []) == []
    # The observer that heard ``before`` hears how the call ended; the one after the refusal heard nothing.
    assert told.heard == [("before", "sqs", "CreateQueue"), ("after", "sqs", "CreateQueue")]
    assert isinstance(told.errors[0], ClientError)
    assert never_told.heard == []


@pytest.mark.parametrize("observe_outside", [True, False])
def test_observe_calls_nests_with_a_locking_wrapper_in_either_order(
    aws: Callable[[str], Client], observe_outside: bool
) -> None:
    original = BaseClient._make_api_call
    recorder = Recorder()
    sqs = aws("sqs")
    if observe_outside:
        with observe_calls(recorder), locked_calls():
            sqs.list_queues()
    else:
        with locked_calls(), observe_calls(recorder):
            sqs.list_queues()
    assert recorder.heard == [("before", "sqs", "ListQueues"), ("after", "sqs", "ListQueues")]
    assert BaseClient._make_api_call is original


def test_observers_run_inside_the_lock_when_observe_calls_is_entered_first(aws: Callable[[str], Client]) -> None:
    held: list[bool] = []

    class LockProbe(Recorder):
        lock: threading.RLock

        def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
            # Another thread cannot take the lock while this call holds it.
            free: list[bool] = []

            def probe() -> None:
                free.append(self.lock.acquire(blocking=False))
                if free[0]:
                    self.lock.release()

            thread = threading.Thread(target=probe)
            thread.start()
            thread.join()
            held.append(not free[0])

    observer = LockProbe()
    sqs = aws("sqs")
    with observe_calls(observer), locked_calls() as lock:
        observer.lock = lock
        sqs.list_queues()
    assert held == [True]

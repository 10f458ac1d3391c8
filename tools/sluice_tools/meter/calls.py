"""See every botocore API call the process makes: each observer hears of it before it is sent and after it returns.

botocore funnels every operation of every client through ``BaseClient._make_api_call``, so one
wrapper there sees them all, whatever created the client. The wrapper calls whatever was installed
when it was entered, so it nests with other wrappers (the local runner's ``serialized_calls`` lock):
enter :func:`observe_calls` *outside* ``serialized_calls`` and the observers run inside the lock,
atomically with the call they watch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from botocore.client import BaseClient

ApiCall = Callable[[BaseClient, str, dict[str, Any]], Any]


class CallObserver(Protocol):
    """Hears of each API call; ``before`` may raise (a ``ClientError``, say) to fail the call unsent."""

    def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        """Called on the calling thread before the request is built; ``params`` as the caller passed them."""

    def after(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        response: Mapping[str, Any] | None,
        error: BaseException | None,
        elapsed_s: float,
    ) -> None:
        """Called once for every ``before`` that returned: with the parsed response, or the error raised."""


class _Calling(threading.local):
    """The clients whose calls are being observed on this thread, innermost last."""

    def __init__(self) -> None:
        self.clients: list[BaseClient] = []


_calling = _Calling()


def current_client() -> BaseClient:
    """The client making the call an observer is hearing of on this thread (its region, its exception classes)."""
    if not _calling.clients:
        raise RuntimeError("current_client() is only defined inside an observed call")
    return _calling.clients[-1]


@contextmanager
def observe_calls(*observers: CallObserver) -> Iterator[None]:
    """Wrap ``BaseClient._make_api_call`` so ``observers`` hear of every call, in order; restore it on exit.

    Thread-safe as far as this wrapper goes (it keeps no shared state); observers lock their own.
    Wrappers must be exited in the reverse order they were entered, as ``with`` does.
    """
    original: ApiCall = BaseClient._make_api_call

    def observed(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        service: str = self.meta.service_model.service_name
        _calling.clients.append(self)
        try:
            return _observe(observers, original, self, service, operation, params)
        finally:
            _calling.clients.pop()

    BaseClient._make_api_call = observed
    try:
        yield
    finally:
        BaseClient._make_api_call = original


def _observe(
    observers: tuple[CallObserver, ...],
    call: ApiCall,
    client: BaseClient,
    service: str,
    operation: str,
    params: dict[str, Any],
) -> Any:
    """One call: every ``before``, the call itself unless a ``before`` raised, then ``after`` for each that heard."""
    heard: list[CallObserver] = []
    try:
        for observer in observers:
            observer.before(service, operation, params)
            heard.append(observer)
    except BaseException as exc:
        # The call is refused before it is sent; those already told hear how it ended.
        for observer in heard:
            observer.after(service, operation, params, None, exc, 0.0)
        raise
    started = time.perf_counter()
    try:
        response = call(client, operation, params)
    except BaseException as exc:
        elapsed = time.perf_counter() - started
        for observer in heard:
            observer.after(service, operation, params, None, exc, elapsed)
        raise
    elapsed = time.perf_counter() - started
    for observer in heard:
        observer.after(service, operation, params, response, None, elapsed)
    return response

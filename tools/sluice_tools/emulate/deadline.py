"""Lambda's timeout, played: an invocation still running at its configured timeout is stopped where it stands.

Lambda ends an invocation at its timeout wherever it is (mid-fetch, between two writes) and starts
the runtime afresh for the next one; an SQS batch it held is not deleted and comes back after the
queue's visibility timeout. The emulated runner calls handlers on its worker threads, so the stop
is an exception raised *into* that thread at the deadline (``PyThreadState_SetAsyncExc``), with the
thread's event loop woken so that a fetch waiting on a socket sees it at once. The container is
then dropped, as Lambda drops it. Nothing else is killed: only the invocation's own thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class LambdaTimedOut(BaseException):
    """Raised into an invocation's thread at its deadline (a BaseException: the handler's ``except Exception``
    clauses must not swallow it, as nothing in a real handler survives Lambda's stop)."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class _Deadline:
    def __init__(self, thread_id: int, loop: asyncio.AbstractEventLoop | None, timeout_s: float) -> None:
        self._thread_id, self._loop = thread_id, loop
        self._lock = threading.Lock()
        self._running = True
        self.fired = False
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._running:
                return
            self.fired = True
            _raise_in(self._thread_id, LambdaTimedOut)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: None)  # out of select(): the exception lands now

    def stop(self) -> bool:
        """Called by the invocation's thread when the handler returned; True if the deadline fired first."""
        self._timer.cancel()
        with self._lock:
            self._running = False
        if self.fired:
            _raise_in(self._thread_id, None)  # still pending: cleared, the caller treats it as the stop
        return self.fired


def call_with_deadline(call: Callable[[], T], timeout_s: float, loop: asyncio.AbstractEventLoop | None = None) -> T:
    """``call()`` on this thread, stopped with :class:`LambdaTimedOut` if it runs past ``timeout_s``."""
    deadline = _Deadline(threading.get_ident(), loop, timeout_s)
    deadline.start()
    try:
        try:
            result = call()
        finally:
            fired = deadline.stop()
        if fired:
            raise LambdaTimedOut(f"Task timed out after {timeout_s:.2f} seconds")
        return result
    except LambdaTimedOut:
        _raise_in(threading.get_ident(), None)
        raise

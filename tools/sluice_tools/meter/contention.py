"""An observer that models two DynamoDB behaviours moto lacks: transaction conflicts, and hot items.

(a) Each write request holds the items it touches for a modelled service time from the moment
it is called. A write that arrives while an item is held by a call from another thread (another
container, or another of one container's concurrent requests), where either of the two is a
TransactWriteItems, fails as DynamoDB fails it: the transaction with TransactionCanceledException
and a ``TransactionConflict`` reason on each conflicting item, a single write with
TransactionConflictException. Plain writes never conflict with each other. A thread's own next
call cannot overlap its last one: it was made after the last one's answer, so it never conflicts
with the holds that thread left (the in-process calls are serialized, so the modelled time stands
in for the real service's).
(b) Writes are counted per item with their times, so a test can name the hottest items and their
peak writes per second (DynamoDB serves about 1,000 WCU per second on one partition, far fewer
when every write is a transaction on one counter).

A write counts when it is let through, whether or not its condition then holds (a failed
condition still reaches the item). A BatchWriteItem holds its items as single writes and, if one
meets a transaction, fails whole with TransactionConflictException: how DynamoDB treats a batch
item that meets a transaction is not spelled out in its guide.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from sluice_tools.meter.calls import current_client
from sluice_tools.meter.dynamo_requests import WRITES, ItemId, item_id, item_writes
from sluice_tools.meter.moto_tables import MOTO_ACCOUNT, MotoTables

Clock = Callable[[], float]
_RATE_WINDOW_S = 1.0
_SWEEP_EVERY = 4096
"""Holds added between sweeps of expired holds on items nobody wrote again."""


@dataclass(frozen=True)
class ItemRate:
    """One item's writes: how many in all, and the most within any one second."""

    item: ItemId
    writes: int
    peak_per_s: int

    def __str__(self) -> str:
        return f"item {self.item}: {self.peak_per_s} writes/s"


@dataclass(frozen=True)
class WriteRates:
    """The highest writes per second any item took, and the items that took the most."""

    peak_per_s: int
    items: tuple[ItemRate, ...]


@dataclass
class _ItemWrites:
    recent: deque[float]
    writes: int = 0
    peak: int = 0


@dataclass(frozen=True)
class _Hold:
    until: float
    transactional: bool
    caller: int
    """The thread that made the call: its own later calls come after the answer."""


class DynamoContention:
    """Fails DynamoDB writes that would conflict with a transaction, and counts writes per item per second.

    ``clock`` (seconds, monotonic) is read under a lock, so the times it gives are ordered; inject
    a fake one to make overlaps deterministic in tests.
    """

    def __init__(
        self,
        *,
        transaction_s: float = 0.025,
        write_s: float = 0.010,
        clock: Clock = time.monotonic,
        account: str = MOTO_ACCOUNT,
    ) -> None:
        self._transaction_s = transaction_s
        self._write_s = write_s
        self._clock = clock
        self._account = account
        self._lock = threading.Lock()
        self._holds: dict[ItemId, list[_Hold]] = {}
        self._writes: dict[ItemId, _ItemWrites] = {}
        self._conflicts: Counter[str] = Counter()
        self._held = 0

    def before(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        if service != "dynamodb" or operation not in WRITES:
            return
        tables = MotoTables(region=current_client().meta.region_name, account=self._account)
        try:
            writes = item_writes(operation, params, tables.key_schema)
        except (KeyError, TypeError, ValueError, AttributeError):
            return  # malformed parameters: botocore refuses the call itself
        transactional = operation == "TransactWriteItems"
        if transactional and len(writes) != len(params.get("TransactItems", [])):
            return  # an action on a table moto lacks: the call fails there, with no item to conflict on
        items = [item_id(w.table, w.key) for w in writes]
        caller = threading.get_ident()
        with self._lock:
            now = self._clock()
            conflicting = [self._conflicts_with(item, now, caller, transactional=transactional) for item in items]
            if any(conflicting):
                self._conflicts[operation] += 1
            else:
                hold = _Hold(now + (self._transaction_s if transactional else self._write_s), transactional, caller)
                for item in items:
                    self._holds.setdefault(item, []).append(hold)
                self._held += len(items)
                if self._held >= _SWEEP_EVERY:
                    self._sweep(now)
                for write, item in zip(writes, items, strict=True):
                    if write.action != "ConditionCheck":
                        self._count_write(item, now)
        if any(conflicting):
            raise _conflict_error(operation, conflicting)

    def after(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        response: Mapping[str, Any] | None,
        error: BaseException | None,
        elapsed_s: float,
    ) -> None:
        """Nothing to do: an item is held for the modelled time, however long moto took."""

    def conflicts(self) -> dict[str, int]:
        """Writes refused for conflict, by operation."""
        with self._lock:
            return dict(self._conflicts)

    def rates(self, top: int = 10) -> WriteRates:
        """The peak writes per second over all items, and the ``top`` items by their peak."""
        with self._lock:
            ranked = sorted(
                (ItemRate(item, counts.writes, counts.peak) for item, counts in self._writes.items()),
                key=lambda rate: (-rate.peak_per_s, -rate.writes, rate.item),
            )
        return WriteRates(peak_per_s=ranked[0].peak_per_s if ranked else 0, items=tuple(ranked[:top]))

    def reset(self) -> None:
        with self._lock:
            self._holds.clear()
            self._writes.clear()
            self._conflicts.clear()
            self._held = 0

    def _conflicts_with(self, item: ItemId, now: float, caller: int, *, transactional: bool) -> bool:
        holds = [hold for hold in self._holds.get(item, []) if hold.until > now]
        if holds:
            self._holds[item] = holds
        else:
            self._holds.pop(item, None)
        return any((transactional or hold.transactional) and hold.caller != caller for hold in holds)

    def _sweep(self, now: float) -> None:
        live = {item: [hold for hold in holds if hold.until > now] for item, holds in self._holds.items()}
        self._holds = {item: holds for item, holds in live.items() if holds}
        self._held = 0

    def _count_write(self, item: ItemId, now: float) -> None:
        counts = self._writes.setdefault(item, _ItemWrites(recent=deque()))
        counts.recent.append(now)
        while now - counts.recent[0] >= _RATE_WINDOW_S:
            counts.recent.popleft()
        counts.writes += 1
        counts.peak = max(counts.peak, len(counts.recent))


def _conflict_error(operation: str, conflicting: list[bool]) -> ClientError:
    """The error DynamoDB returns, as the calling client's own exception class so ``except`` clauses match."""
    if operation == "TransactWriteItems":
        codes = ["TransactionConflict" if c else "None" for c in conflicting]
        message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(codes)}]"
        response: dict[str, Any] = {
            "Error": {"Code": "TransactionCanceledException", "Message": message},
            "Message": message,
            "CancellationReasons": [
                {"Code": code, "Message": "Transaction is ongoing for the item"} if code != "None" else {"Code": code}
                for code in codes
            ],
        }
    else:
        message = "Transaction is ongoing for the item"
        response = {"Error": {"Code": "TransactionConflictException", "Message": message}, "Message": message}
    response["ResponseMetadata"] = {"HTTPStatusCode": 400}
    code = response["Error"]["Code"]
    error_class: type[ClientError] = current_client().exceptions.from_code(code)
    return error_class(response, operation)

"""AWS's limits, read from ``quotas.yaml`` beside this module: one place for every quota the model checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import yaml

QUOTAS_FILE = Path(__file__).with_name("quotas.yaml")
FIELDS = ("value", "unit", "adjustable", "what", "source", "url")


@dataclass(frozen=True, slots=True)
class Quota:
    """One limit and where AWS states it."""

    name: str
    value: float
    unit: str
    adjustable: bool
    what: str
    source: str
    url: str


class QuotaFileError(ValueError):
    """The quotas file is missing an entry or a field, or holds a value that is not a positive number."""


@dataclass(frozen=True, slots=True)
class Quotas:
    """Every quota by name; ``q["lambda_timeout_s"]`` is its value."""

    entries: dict[str, Quota]

    def __getitem__(self, name: str) -> float:
        return self.entries[name].value

    def quota(self, name: str) -> Quota:
        return self.entries[name]

    def scaled(self, **values: float) -> Quotas:
        """The same quotas with some values replaced (a test's small window, say); unknown names are an error."""
        unknown = set(values) - set(self.entries)
        if unknown:
            raise KeyError(f"no such quota: {', '.join(sorted(unknown))}")
        return Quotas({n: replace(q, value=float(values.get(n, q.value))) for n, q in self.entries.items()})


REQUIRED = (
    "sqs_fifo_in_flight",
    "sqs_fifo_head_window",
    "sqs_fifo_high_throughput_requests_per_s",
    "sqs_fifo_partition_requests_per_s",
    "sqs_message_bytes",
    "sqs_batch_messages",
    "lambda_timeout_s",
    "lambda_memory_mb",
    "lambda_mb_per_vcpu",
    "lambda_account_concurrency",
    "lambda_sqs_maximum_concurrency",
    "dynamodb_partition_wcu_per_s",
    "dynamodb_partition_rcu_per_s",
    "dynamodb_item_bytes",
    "dynamodb_transaction_items",
    "s3_prefix_put_per_s",
    "s3_prefix_get_per_s",
)


def load_quotas(path: Path = QUOTAS_FILE) -> Quotas:
    """The quotas in ``path``; :class:`QuotaFileError` naming the entry and field that is wrong."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise QuotaFileError(f"{path.name}: expected a mapping of quota names, found {type(raw).__name__}")
    entries: dict[str, Quota] = {}
    for name in REQUIRED:
        entry = raw.get(name)
        if not isinstance(entry, dict):
            raise QuotaFileError(f"{path.name}: quota {name!r} is missing")
        missing = [f for f in FIELDS if f not in entry]
        if missing:
            raise QuotaFileError(f"{path.name}: quota {name!r} lacks {', '.join(missing)}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise QuotaFileError(f"{path.name}: quota {name!r} has value {value!r}, not a positive number")
        entries[name] = Quota(
            name, float(value), str(entry["unit"]), bool(entry["adjustable"]), str(entry["what"]),
            str(entry["source"]), str(entry["url"]),
        )  # fmt: skip
    return Quotas(entries)

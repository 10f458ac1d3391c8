"""What a store's failure means to the pipeline, whichever store it is: DynamoDB, S3 and SQS when deployed,
SQLite and files locally.

The adapters translate their libraries' errors into these at the port (botocore's ``ClientError`` codes,
``sqlite3`` and ``OSError``), with ``raise ... from exc`` so the original stays on the chain; a step
catches the kind it can act on and lets the others fail the record. Each message says which call
failed on what, and why, in the store's own words.
"""

from __future__ import annotations


class StoreError(Exception):
    """A store failed a call: one of the kinds below, or a failure none of them names (the store did not
    answer, or answered with an error the adapter does not know)."""


class Conflict(StoreError):
    """Another writer got there first: a condition on what this call writes no longer holds (a transaction
    cancelled by a concurrent one, an item or file changed under it). Read again before deciding."""


class Throttled(StoreError):
    """The store asked the caller to slow down, and kept asking after the adapter's own retries: try again
    later (a message returned to the queue comes back after its visibility)."""


class Missing(StoreError):
    """What the call reads is not there (an object key, a file): it expired, or was never written."""


class Denied(StoreError):
    """The store refused the caller: its role (or the file's permissions) does not allow the call."""

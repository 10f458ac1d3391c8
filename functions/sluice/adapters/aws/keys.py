"""Every DynamoDB key the pipeline writes, in one place (``pk``, ``sk``), with who writes it how often.

Ledger table:

- ``crawl#NAME`` / ``run#RUN_ID``: a run. Written a handful of times per run (open, seeds
  planned, seeded, checked, finalizing, finished).
- ``active`` / ``NAME``: the crawl's lock, taken with the run (one transaction, once per run).
- ``progress#RUN_ID`` / ``NN``: 16 progress shards (``sluice.domain.runs.PROGRESS_SHARDS``); each
  fetcher invocation adds its batch to one shard chosen at random, so a shard takes 1/16th of the invocation rate.
- ``url#RUN_ID#H`` / ``URL_HASH``: one URL of a run, in 16 partitions by the hash's first hex
  digit (``H``). A link's claim creates it; the URL's result replaces it once. A seed has no
  item until its result.

- ``finalize#RUN_ID`` / ``ATTEMPT#PHASE``: the finalize shards of one phase of one finalizing attempt
  that are done (a number set, ``done``): one conditional ``UpdateItem`` per shard task, at most a few
  hundred per phase (a set of 4,096 shard numbers is about 20 KB, far inside the 400 KB item limit).

- ``host#HOST`` / ``state``: what the fleet knows of one target host (``sluice.domain.hosts``).
  Written at most once per fetcher batch holding the host, and only when it says something.

Records table (only for specs with ``output.records_table``):

- ``rec#NAME`` / ``RECORD_KEY`` (a hash when the key is long): a record's current content.

The attributes beside the keys, and each item's encoding, are ``codec.py``'s.
"""

from __future__ import annotations

import hashlib

PK, SK = "pk", "sk"
"""The key attributes of both tables (partition, sort): strings, as ``infra/storage.py`` declares them."""
URL_PARTITIONS = 16
_MAX_SORT_KEY = 512

Key = dict[str, str]


def run(crawl: str, run_id: str) -> Key:
    return {PK: f"crawl#{crawl}", SK: f"run#{run_id}"}


def runs_of(crawl: str) -> str:
    return f"crawl#{crawl}"


def run_sort_key(run_id: str) -> str:
    return f"run#{run_id}"


LOCK_PK = "active"


def lock(crawl: str) -> Key:
    return {PK: LOCK_PK, SK: crawl}


def progress(run_id: str, shard: int) -> Key:
    return {PK: f"progress#{run_id}", SK: f"{shard:02d}"}


def url_partition(run_id: str, partition: int) -> str:
    return f"url#{run_id}#{partition:x}"


def url(run_id: str, url_hash: str) -> Key:
    return {PK: url_partition(run_id, int(url_hash[0], 16)), SK: url_hash}


def finalize_phase(run_id: str, attempt: str, phase: str) -> Key:
    return {PK: f"finalize#{run_id}", SK: f"{attempt}#{phase}"}


def host(host_key: str) -> Key:
    return {PK: f"host#{host_key}", SK: "state"}


def record(crawl: str, record_key: str) -> Key:
    """The record key itself when short enough, else a hash of it."""
    encoded = record_key.encode()
    sort_key = record_key if len(encoded) <= _MAX_SORT_KEY else "sha256:" + hashlib.sha256(encoded).hexdigest()
    return {PK: f"rec#{crawl}", SK: sort_key}

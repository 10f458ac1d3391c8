"""The runtime defaults, written once: the stack (``infra/config.py``), the functions' ``Settings`` and the
steps' ``Tuning`` all read them from here, so that no default can drift between what the stack deploys,
what a function assumes when a variable is unset, and what the local runner and tests run by.

Plain numbers only: this module imports nothing, so the CDK app, the functions and the tools can all read it.
"""

from __future__ import annotations

# The queue and its messages.
MAX_RECEIVE_COUNT = 5
"""A message's last receive: a transient failure then counts as failed (and SQS moves it to the dead-letter
queue), so the run can finish."""
URLS_PER_MESSAGE = 10
BATCH_SIZE = 10
"""Messages a fetcher receives at once (SQS FIFO's most)."""
LOCAL_BATCH_MESSAGES = 100
"""Messages a worker of ``sluice run`` receives at once (``--batch-messages``): the local queue has no SQS limit,
and each batch of one host ends on a round trip its slots are not all used in and a write that holds the host,
so fewer, larger batches keep the host busier (1,000 URLs at 32 in flight: 32 round trips for 31.25 round trips'
worth of pages, where 100 URLs take 4 for 3.1)."""
LOCAL_BATCH_MESSAGES_MAX = 1000
PACK_RECEIVES = 8
"""Receives a fetcher may add to a batch whose hosts leave the crawl's concurrency unused (0: none)."""
HOST_BACKLOG_MESSAGES = 20
"""Messages of one host the fan-out puts in the queue at once; the rest follow in waves (0: no cap)."""
EARLY_WRITE_URLS = 0
"""A batch of at least this many URLs is written in chunks while it fetches (``pipeline/visit/writer.py``; 0: off;
the local runner sets its own, where parts are files)."""
VISIBILITY_BASE_S = 10.0
"""First visibility backoff of a message returned for a transient failure; doubles per receive..."""
VISIBILITY_MAX_S = 900.0
"""...up to this."""
LOCAL_VISIBILITY_BASE_S = 1.0
LOCAL_VISIBILITY_MAX_S = 10.0
"""The same backoff where a run plays on one machine (``sluice run``, the emulated stack): a returned message
comes back in seconds, so a run with faults stays short."""

# A run and its catalog.
RUN_DEADLINE_HOURS = 12
CLAIM_TTL_DAYS = 15
"""A run's URL entries live this long: the next run seeds from them, so a crawl runs at least this often."""


def catalog_max_age_days(claim_ttl_days: float) -> float:
    """A catalog run older than this is not seeded from: a day inside its URL entries' TTL, so none has expired."""
    return claim_ttl_days - 1


CATALOG_MAX_AGE_DAYS = catalog_max_age_days(CLAIM_TTL_DAYS)

# What the stack gives the functions (the run's cost estimate prices their time with it).
FETCHER_MEMORY_MB = 512
FINALIZER_MEMORY_MB = 2048

# Finalizing in shards.
FINALIZE_SHARD_PAGES = 50_000
"""Pages a finalize shard holds at most: the shard count is the smallest power of two that keeps to it."""
FINALIZE_MAX_SHARDS = 4096
"""Shards a run may have (4096 x 50,000 = 200M pages); a run that needs more ends failed, saying so."""
FINALIZE_ATTEMPTS = 3
"""Finalizing attempts a run gets (the sweep starts another after 20 minutes); then it ends failed."""

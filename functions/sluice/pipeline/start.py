"""Start a run: take the crawl's lock, open the run, claim its seeds and fan them into the queue.

A fan-out proceeds in chunks and stops while it has time left: the caller continues it from
``offset`` in a fresh invocation, so a million seeds fit Lambda's 15 minutes and its memory.
Until the fan-out completes the run is seeding: however fast the fetchers catch up, it is not
done, and the invocation that completes the fan-out asks for finalizing if they already have.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from itertools import islice

from sluice.extraction.urls import canonicalize_url
from sluice.messages import StartEvent, UrlTask
from sluice.observability import logger
from sluice.pipeline.services import Services

CHUNK = 1_000
"""Seeds claimed and sent per step: 11 DynamoDB transactions and 10 SQS requests."""


@dataclass(frozen=True, slots=True)
class StartResult:
    crawl: str
    run_id: str
    offset: int
    """Seeds handled so far (all of them when ``complete``)."""
    total: int
    enqueued: int
    complete: bool


def start_run(event: StartEvent, services: Services, *, time_left: Callable[[], float]) -> StartResult:
    """Open a run (or continue one's fan-out) and enqueue seeds until done or ``time_left()`` runs low."""
    spec = services.spec(event.crawl)
    resuming = event.run_id is not None
    if event.run_id is not None:
        run_id = event.run_id
    elif (held := _held_by(services, spec.name, event.trigger)) is not None:
        # Lambda retried a start that died mid-fan-out: the run it opened is this start's own.
        run_id, resuming = held, True
        logger.warning("start retried: resuming its run", extra={"crawl": spec.name, "run_id": run_id})
    else:
        deadline = timedelta(hours=services.settings.run_deadline_hours)
        run = services.ledger.open_run(spec.name, spec.digest(), deadline, trigger=event.trigger)
        run_id = run.run_id
        logger.info("run opened", extra={"crawl": spec.name, "run_id": run_id, "seeds": spec.seeds.count()})
    total = spec.seeds.count()
    offset = event.offset
    enqueued = 0
    seeds = islice(spec.seeds.iter_urls(), offset, None)
    started = time.monotonic()
    while offset < total:
        chunk = [UrlTask(url=canonicalize_url(u), depth=0) for u in islice(seeds, CHUNK)]
        if not chunk:
            break
        claimed = services.ledger.claim(spec.name, run_id, chunk, max_pages=spec.follow.max_pages)
        if resuming:
            # A continuation or a retried start may follow one that claimed seeds and died before sending them.
            claimed += unsent(services, run_id, chunk, claimed)
        services.queue.send(spec.name, run_id, claimed)
        offset += len(chunk)
        enqueued += len(claimed)
        step = (time.monotonic() - started) / max(1, offset - event.offset) * CHUNK
        if offset < total and time_left() < max(60.0, 4 * step):
            services.continue_start({"crawl": spec.name, "run_id": run_id, "offset": offset})
            logger.info("fan-out continues", extra={"crawl": spec.name, "run_id": run_id, "offset": offset})
            return StartResult(spec.name, run_id, offset, total, enqueued, complete=False)
    logger.info("fan-out complete", extra={"crawl": spec.name, "run_id": run_id, "seeds": total, "enqueued": enqueued})
    seeded = services.ledger.seeded(spec.name, run_id)
    if seeded is not None and seeded.status == "running" and seeded.drained:
        # The fetchers finished every page while the fan-out was still under way: none of them will ask.
        services.finalize_later({"crawl": spec.name, "run_id": run_id})
    return StartResult(spec.name, run_id, offset, total, enqueued, complete=True)


def _held_by(services: Services, crawl: str, trigger: str | None) -> str | None:
    """The run in flight that this very trigger opened, if any (a retried start)."""
    if trigger is None:
        return None
    lock = services.ledger.active_run(crawl)
    return str(lock["run_id"]) if lock is not None and lock.get("trigger") == trigger else None


def unsent(services: Services, run_id: str, tasks: list[UrlTask], claimed: list[UrlTask]) -> list[UrlTask]:
    """Tasks claimed earlier but still queued: sent again, since a second delivery is harmless and a lost one is not."""
    fresh = {t.url for t in claimed}
    rest = [t for t in tasks if t.url not in fresh]
    claims = services.ledger.claims(run_id, (t.url for t in rest))
    return [t for t in rest if claims.get(t.url, {}).get("status") == "queued"]

"""Send again the links a stalled run claimed and never visited, shard by shard, a bounded share per call.

The sweep calls it for a run that did not move between two of its counts (``sluice.pipeline.finalize.driver``);
``sluice run`` calls it once a local fleet has gone quiet with links still waiting.
"""

from __future__ import annotations

import json

from sluice.domain.layout import work_prefix
from sluice.domain.shards import MAX_SHARDS, Shard, shard_count
from sluice.messages import UrlTask
from sluice.observability import logger
from sluice.pipeline.services import Services

REVIVE_LIMIT = 100_000
"""Waiting links sent again at most per call (a stalled run of more is revived over several sweeps)."""
REVIVE_ENTRIES = 400_000
"""URL entries a sweep's call reads at most before it stops after a whole shard (about a minute of Queries):
a 10M-page run is read over several sweeps, shard by shard from where the last call stopped."""


def revive_waiting(
    services: Services, crawl: str, run_id: str, *, shards: int | None = None, budget: int | None = REVIVE_ENTRIES
) -> int:
    """Send again the links claimed for the run and still waiting, shard by shard; return how many were sent.

    A claim is sent by the page that made it, and sent again by that page's redelivery if it finds the
    link again; if it does not (the page failed on its last try, or changed), the claim would wait
    forever. A duplicate of a message still in the queue is harmless: it is looked up and skipped.

    One call reads whole finalize shards (``shards`` of them, or as many as finalizing the run takes),
    from the shard after the one the last call ended on (``finalize/revive.json``), until it has read
    ``budget`` entries (None: every shard, once) or found ``REVIVE_LIMIT`` waiting links; so a call
    is bounded however large the run, and a stalled run is revived whole over consecutive sweeps.
    """
    if shards is None:
        run = services.ledger.get_run(crawl, run_id)
        pages = (run.seeds if run is not None else 0) + services.frontier.progress(run_id).claimed
        shards = shard_count(pages, services.tuning.finalize_shard_pages, MAX_SHARDS)
    cursor_key = f"{work_prefix(crawl, run_id)}finalize/revive.json"
    saved = json.loads(services.objects.get(cursor_key) or b"{}")
    first = int(saved["next"]) if saved.get("shards") == shards else 0
    waiting: list[UrlTask] = []
    read, index = 0, first
    while True:
        for entry in services.frontier.scan(run_id, shard=Shard(index, shards)):
            read += 1
            if entry.result is None and entry.origin == "link":
                waiting.append(
                    UrlTask(
                        url=entry.url,
                        depth=entry.depth,
                        origin="link",
                        parent=entry.parent,
                        again=True,
                        via=entry.via,
                        carry=dict(entry.carry) if entry.carry else None,
                    )
                )
                if len(waiting) >= REVIVE_LIMIT:
                    break  # this shard is not read to its end: the next call starts with it again
        else:
            index = (index + 1) % shards
            if index != first and (budget is None or read < budget):
                continue
        break
    if shards > 1:
        services.objects.put(cursor_key, json.dumps({"shards": shards, "next": index}).encode(), "application/json")
    if waiting:
        services.queue.send(crawl, run_id, waiting)
        logger.warning("waiting links sent again", extra={"crawl": crawl, "run_id": run_id, "links": len(waiting)})
    return len(waiting)

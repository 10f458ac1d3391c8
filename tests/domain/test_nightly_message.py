"""A nightly run's tasks carry each page's prior state: ten messages of ten still make one SQS request of 64 KB."""

from __future__ import annotations

import base64
import hashlib
import json

from sluice.adapters.aws.queue import batches
from sluice.domain.pages import RECORD_DIGEST_BYTES, Prior
from sluice.messages import CrawlMessage, PriorState, UrlTask, pack, parse_body

SQS_BILLED_CHUNK = 64 * 1024
"""SQS bills each 64 KB of a request's payload (a batch's messages together) as one request."""
RUN = "20261202T000000Z-abcdef"


def _prior(page: int, records: int = 20) -> Prior:
    """What the demo crawl's catalog knows of a listing page: both validators, a body hash, its 20 books' digests."""
    seed = hashlib.sha256(str(page).encode()).digest()
    digests = b"".join(hashlib.sha256(seed + bytes([n])).digest()[:RECORD_DIGEST_BYTES] for n in range(records))
    return Prior(
        etag=f'"{seed.hex()[:24]}"',
        last_modified="Mon, 01 Jan 2024 00:00:00 GMT",
        body_hash=seed.hex()[:32],
        records=records,
        digests=digests,
        reused=True,
        fetched_at=1796210765,
    )


def _nightly_tasks(pages: int) -> list[UrlTask]:
    return [
        UrlTask(url=f"http://127.0.0.1:43465/catalogue/page-{1_000_000 + n}.html", prior=PriorState.of(_prior(n)))
        for n in range(pages)
    ]


def test_a_send_of_a_hundred_nightly_tasks_is_one_billed_request_each_way() -> None:
    # A fetcher invocation takes ten messages of ten URLs: the send and the event source's receive carry them together.
    messages = list(pack("demo-books", RUN, _nightly_tasks(100), urls_per_message=10))
    [batch] = list(batches(iter(messages)))
    payload = sum(len(body.encode()) for _, body in batch)
    assert len(batch) == 10
    assert payload <= SQS_BILLED_CHUNK, f"{payload:,} bytes: billed as {-(-payload // SQS_BILLED_CHUNK)} requests"


def test_a_task_decodes_to_what_it_was_made_of() -> None:
    [(_, body)] = list(pack("demo-books", RUN, _nightly_tasks(1), urls_per_message=10))
    [task] = parse_body(CrawlMessage, body).tasks
    assert task.prior is not None
    assert task.prior.prior() == _prior(0)
    link = UrlTask(url="https://a.example/x", depth=3, origin="link", parent="0123456789abcdef", again=True, lastmod=9)
    assert UrlTask.model_validate_json(link.model_dump_json()) == link
    assert PriorState.of(Prior()).prior() == Prior()


def test_a_message_an_older_sender_wrote_still_decodes_to_the_same_tasks() -> None:
    # Every field written out, digests in base64: what a scheduler and fetchers sent before, maybe still in the queue.
    prior = _prior(3)
    old = {
        "v": 2,
        "crawl": "demo-books",
        "run_id": RUN,
        "tasks": [
            {
                "url": "https://a.example/page-3.html",
                "depth": 0,
                "origin": "seed",
                "parent": None,
                "prior": {
                    "etag": prior.etag,
                    "lm": prior.last_modified,
                    "body": prior.body_hash,
                    "n": prior.records,
                    "d": base64.b64encode(prior.digests).decode(),
                    "c": True,
                    "ft": prior.fetched_at,
                },
                "again": False,
                "lastmod": None,
            },
            {"url": "https://a.example/b.html", "depth": 2, "origin": "link", "parent": "0123456789abcdef"},
        ],
    }
    seeded, linked = parse_body(CrawlMessage, json.dumps(old)).tasks
    assert seeded.prior is not None
    assert seeded.prior.prior() == prior
    assert (seeded.depth, seeded.origin, seeded.parent, seeded.again, seeded.lastmod) == (0, "seed", None, False, None)
    assert (linked.depth, linked.origin, linked.parent, linked.prior) == (2, "link", "0123456789abcdef", None)

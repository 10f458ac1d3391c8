"""A worker of ``sluice run`` takes its host's next batch at the last one's tail, on the same container.

A batch of one host used to end with the host's slots idle: the last round trip, the last chunk's write, the
deletes, the next receive, refill and first round trip (about a tenth of a second a batch at 32 in flight).
Now the next batch is visited while the last one ends; the host's cap holds across both (one fetcher's gate),
and every page is fetched and counted once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.adapters.local.queue import SqliteQueue
from sluice.spec import parse_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner.local import LocalFleet

from .conftest import SpecData

CRAWL = "chain"
HOST = "127.0.0.1"
URLS = 400
CAP = 4


def one_host(tmp_path: Path, books_spec: SpecData, base_url: str) -> tuple[Path, dict[str, Any]]:
    urls = [f"/catalogue/page-1.html?copy={n}" for n in range(URLS)]
    data = books_spec(CRAWL, base_url, pages=0, urls=urls, max_depth=0)
    data["politeness"] |= {"concurrency": CAP, "concurrency_per_domain": CAP}
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return crawls, data


def test_a_hosts_next_batch_is_taken_and_fetched_before_the_last_one_is_written_within_the_cap(
    tmp_path: Path, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, set[str], set[str]]] = []
    receive_held, delete = SqliteQueue.receive_held, SqliteQueue.delete

    def held(self: SqliteQueue, run_id: str, holding: Any, *args: Any) -> Any:
        got = receive_held(self, run_id, holding, *args)
        calls.append(("held", set(holding), {m.receipt_handle for m in got}))
        return got

    def deleted(self: SqliteQueue, receipts: Any) -> None:
        calls.append(("delete", set(receipts), set()))
        delete(self, receipts)

    monkeypatch.setattr(SqliteQueue, "receive_held", held)
    monkeypatch.setattr(SqliteQueue, "delete", deleted)
    with running_demo_site(books=100, latency_ms=20) as site:
        crawls, data = one_host(tmp_path, books_spec, site.base_url)
        # 10 messages of 10 URLs a batch, at 4 in flight: each batch's tail is its last 68 URLs (TAIL_LEAD).
        fleet = LocalFleet(crawls, tmp_path / "state", workers=2, batch_messages=10, allow_loopback=True)
        run = fleet.run(parse_spec(data))
        fetches = site.stats.count("/catalogue/page-1.html")  # the path without its query: every copy
        most_at_once = site.stats.max_in_flight_by_host[HOST]
    assert run.summary.pages.fetched == URLS
    assert fetches == URLS  # each page fetched once
    assert most_at_once == CAP  # reached, never passed, though two batches of the host overlapped
    taken = [at for at, (kind, _, got) in enumerate(calls) if kind == "held" and got]
    assert len(taken) >= 2  # batches after the first were taken at the last one's tail...
    for at in taken:  # ...while the batch holding the host was still undeleted (so not yet written either)
        holding = calls[at][1]
        assert any(kind == "delete" and receipts & holding for kind, receipts, _ in calls[at + 1 :])
    lines = [json.loads(line) for line in Path(run.outputs["logs"]).read_text(encoding="utf-8").splitlines()]
    done = [line for line in lines if line.get("message") == "batch done"]
    assert sum(line["counted"] for line in done) == URLS  # every page counted once, by one batch

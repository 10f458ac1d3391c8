"""A host's seeds past its cap wait in S3 and follow in waves, sent by the fetchers; the run still counts each once."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from sluice import messages
from sluice.domain.hosts import host_key
from sluice.domain.layout import backlog_key
from sluice.messages import StartEvent, UrlTask
from sluice.pipeline.start import backlog
from sluice.pipeline.start import fanout as start
from sluice.pipeline.start.backlog import chunk_name, send_backlog, wave_name
from sluice.pipeline.start.fanout import start_run
from sluice_tools.demosite import RunningDemoSite

from .conftest import Pipeline, SpecData

HOST = host_key("http://127.0.0.1:9/")


def seeds_spec(name: str, count: int) -> dict[str, Any]:
    """``count`` template seeds of one host nothing listens on: queued, never fetched."""
    return {
        "name": name,
        "seeds": {"template": "http://127.0.0.1:9/item/{n}.html", "range": {"start": 1, "stop": count}},
        "follow": {"max_pages": 100_000},
        "extract": {"fields": {"title": "h1::text"}},
    }


def play_queue(pipeline: Pipeline, crawl: str, run_id: str, limit: int) -> tuple[Counter[str], int]:
    """Receive every message as a fetcher would, sending the chunks its tasks point at before deleting it;
    the URLs received, and the most messages the queue held at once."""
    urls: Counter[str] = Counter()
    peak = 0
    for _ in range(limit):
        batch = pipeline.receive(10)
        if not batch:
            return urls, peak
        pointers = []
        for message in batch:
            for task in json.loads(message.body)["tasks"]:
                urls[task["url"]] += 1
                if task.get("backlog"):
                    pointers.append((task["backlog"], False))
        send_backlog(pipeline.services, crawl, run_id, pointers)
        peak = max(peak, pipeline.in_queue())  # the batch still in flight, and what its pointers sent
        pipeline.ack(batch)
    raise AssertionError(f"queue not played out in {limit} receives")


def all_urls(count: int) -> set[str]:
    return {f"http://127.0.0.1:9/item/{n}.html" for n in range(1, count + 1)}


def test_a_host_past_its_cap_is_queued_a_wave_at_a_time_and_every_seed_once(pipeline: Pipeline) -> None:
    pipeline.configure(host_backlog_messages=3)  # 30 URLs of the host in the queue at once
    pipeline.spec(seeds_spec("waves", 500))
    run_id = pipeline.start("waves")
    assert pipeline.in_queue() == 4  # 29 tasks in 3 messages, and the held 30th in one of its own
    assert pipeline.run_state("waves", run_id).seeds == 500
    urls, peak = play_queue(pipeline, "waves", run_id, 200)
    assert set(urls) == all_urls(500)
    assert set(urls.values()) == {1}
    assert peak <= 2 * 3 + 1  # a wave (3 messages) and the next, sent before the wave's last message is deleted
    # 470 spilled URLs in waves of 30, 10 waves to a chunk: chunk 0 (300 URLs), chunk 1 (170: 6 waves, the last
    # of 20 URLs pointing nowhere).
    last = pipeline.services.objects.get(backlog_key("waves", run_id, chunk_name(HOST, 1)))
    assert last is not None
    pointers = [json.loads(line).get("backlog") for line in last.decode().splitlines()]
    assert len(pointers) == 170
    assert [p for p in pointers if p] == [f"{chunk_name(HOST, 1)}/{w:02d}" for w in range(1, 6)]
    assert pointers[-20:] == [None] * 20
    assert pipeline.services.objects.get(backlog_key("waves", run_id, chunk_name(HOST, 2))) is None


def test_a_capped_fan_out_hands_its_hosts_state_to_its_continuation(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(start, "CHUNK", 100)
    pipeline.configure(host_backlog_messages=2)
    size = 450
    pipeline.spec(seeds_spec("handed", size))
    first = start_run(StartEvent(crawl="handed"), pipeline.services, time_left=lambda: 0.0)
    assert (first.complete, first.offset) == (False, 100)
    assert pipeline.in_queue() == 2  # 19 tasks sent; the 20th held, 80 spilled (chunks not reachable yet)
    continuations = 0
    while pipeline.start_requests:
        continuations += 1
        event = StartEvent.model_validate(pipeline.start_requests.pop())
        left = 900.0 if continuations > 2 else 0.0
        start_run(event, pipeline.services, time_left=lambda: left)  # noqa: B023 - called before the next round
    run = pipeline.run_state("handed", first.run_id)
    assert (run.seeding, run.seeds, run.fanned_out, continuations) == (False, size, size, 3)
    urls, _ = play_queue(pipeline, "handed", first.run_id, 200)
    assert set(urls) == all_urls(size)
    assert set(urls.values()) == {1}


def test_a_retried_capped_continuation_writes_the_same_chunks_and_loses_no_seed(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuation that died sending its held tasks is retried from the offset it was given: it writes the same
    chunks again (their contents come from the seeds alone, never from the time), and every seed arrives."""
    monkeypatch.setattr(start, "CHUNK", 100)
    pipeline.configure(host_backlog_messages=2)
    size = 300
    pipeline.spec(seeds_spec("twice", size))
    first = start_run(StartEvent(crawl="twice"), pipeline.services, time_left=lambda: 0.0)
    continuation = StartEvent.model_validate(pipeline.start_requests.pop())
    queue = pipeline.services.queue
    real_send = queue.send

    def dies_sending_held(crawl: str, run_id: str, tasks: Any) -> int:
        if any(t.backlog for t in tasks):
            raise ConnectionError("the scheduler died sending its held tasks")
        return int(real_send(crawl, run_id, tasks))

    def chunks() -> list[bytes | None]:
        return [
            pipeline.services.objects.get(backlog_key("twice", first.run_id, chunk_name(HOST, n))) for n in range(3)
        ]

    monkeypatch.setattr(queue, "send", dies_sending_held)
    with pytest.raises(ConnectionError):
        start_run(continuation, pipeline.services, time_left=lambda: 900.0)
    written = chunks()
    monkeypatch.setattr(queue, "send", real_send)
    assert start_run(continuation, pipeline.services, time_left=lambda: 900.0).complete is True
    assert [c is None for c in written] == [False, False, True]  # 280 spilled URLs: chunks of 200 and 80
    assert chunks() == written
    urls, _ = play_queue(pipeline, "twice", first.run_id, 200)
    assert set(urls) == all_urls(size)


def test_a_nightly_run_fed_in_waves_counts_every_page_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """Night 2 seeds every page night 1 found (one host): with a cap of one message, almost all of them wait in
    S3 and reach the queue ten at a time, through the fetchers; the run finishes exact."""
    site.set_catalogue(books=800)  # 40 listing pages, one linking the next
    pipeline.spec(
        books_spec("nightly", site.base_url, pages=0, urls=["/catalogue/page-1.html"], max_depth=40, max_pages=40)
    )
    first = pipeline.summary("nightly", pipeline.run("nightly"))
    pipeline.configure(host_backlog_messages=1)
    second_id = pipeline.run("nightly")
    second = pipeline.summary("nightly", second_id)
    assert second["status"] == "finished"
    assert second["pages"]["seeds"] == first["pages"]["fetched"] + first["pages"].get("not_modified", 0)
    assert (first["pages"]["fetched"], second["records"]["total"]) == (40, 800)
    assert second["verdict"]["healthy"] is True
    host = host_key(site.base_url)
    assert pipeline.services.objects.get(backlog_key("nightly", second_id, chunk_name(host, 0))) is not None


def test_a_refill_parses_only_the_wave_it_sends(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk holds ten waves and a refill sends one: parsing the other nine was 55 of a refill's 65 ms."""
    pipeline.configure(host_backlog_messages=3)  # waves of 30 URLs, chunks of 300
    pipeline.spec(seeds_spec("parsed", 500))
    run_id = pipeline.start("parsed")
    raw = pipeline.services.objects.get(backlog_key("parsed", run_id, chunk_name(HOST, 0)))
    assert raw is not None
    lines = raw.decode().splitlines()
    assert len(lines) == 300
    parsed = 0
    real_parse = messages.parse_body

    def counting(model: Any, body: Any) -> Any:
        nonlocal parsed
        parsed += 1
        return real_parse(model, body)

    sent: list[UrlTask] = []
    queue = pipeline.services.queue
    monkeypatch.setattr(backlog, "parse_body", counting)

    def send(crawl: str, run_id: str, tasks: Sequence[UrlTask]) -> int:
        sent.extend(tasks)
        return len(tasks)

    monkeypatch.setattr(queue, "send", send)
    assert send_backlog(pipeline.services, "parsed", run_id, [(wave_name(HOST, 0, 3), True)]) == backlog.Refill(1, 30)
    assert parsed == 30
    assert sent == [UrlTask.model_validate_json(line).model_copy(update={"again": True}) for line in lines[90:120]]
    assert sent[-1].backlog == wave_name(HOST, 0, 4)
    assert send_backlog(pipeline.services, "parsed", run_id, [(wave_name(HOST, 0, 10), False)]) == backlog.Refill(0, 0)


def test_a_carried_field_named_backlog_does_not_end_a_wave(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wave ends at the task that points at the next: a task carrying a field of that name does not."""
    carrying = UrlTask(url="http://127.0.0.1:9/a.html", carry={"backlog": f"{chunk_name(HOST, 0)}/01"})
    pointing = UrlTask(url="http://127.0.0.1:9/b.html", backlog=f"{chunk_name(HOST, 0)}/01")
    last = UrlTask(url="http://127.0.0.1:9/c.html")
    body = "".join(t.model_dump_json() + "\n" for t in (carrying, pointing, last)).encode()
    pipeline.services.objects.put(backlog_key("c", "r", chunk_name(HOST, 0)), body, "application/x-ndjson")
    sent: list[list[UrlTask]] = []

    def send(crawl: str, run_id: str, tasks: Sequence[UrlTask]) -> int:
        sent.append(list(tasks))
        return len(tasks)

    monkeypatch.setattr(pipeline.services.queue, "send", send)
    for wave in (0, 1, 2):
        send_backlog(pipeline.services, "c", "r", [(wave_name(HOST, 0, wave), False)])
    assert sent == [[carrying, pointing], [last]]

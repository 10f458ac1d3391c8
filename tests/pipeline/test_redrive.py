"""`sluice redrive` in the middle of a run: dead letters back in the frontier, drained, and every page counted once."""

from __future__ import annotations

import pytest

from sluice.adapters.aws.clients import client
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.move_tasks import MoveTasks

from .conftest import LocalHarness, Pipeline, SpecData

CRAWL = "books"
PAGES, BOOKS = 5, 100


def _to_the_dead_letters(pipeline: Pipeline, *, visit: bool) -> None:
    """Receive the queue's next message until the queue gives up on it; visit it the first time if asked
    (its pages are then done, but it is never deleted: a fetcher that died before its batch's delete)."""
    first = pipeline.receive(1)
    assert len(first) == 1
    if visit:
        assert pipeline.invoke(first) == set()
    pipeline.make_visible(first)
    for _ in range(pipeline.max_receive_count - 1):
        again = pipeline.receive(1)
        assert [m.id for m in again] == [first[0].id]
        pipeline.make_visible(again)


def test_a_redriven_run_finishes_with_each_page_counted_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline.configure(urls_per_message=1)  # a message a listing page
    pipeline.spec(books_spec(CRAWL, site.base_url, max_depth=0))
    run_id = pipeline.start(CRAWL)
    _to_the_dead_letters(pipeline, visit=True)  # counted, then dead-lettered all the same
    _to_the_dead_letters(pipeline, visit=False)  # never visited
    pipeline.drain()
    pipeline.finalize()
    assert pipeline.run_state(CRAWL, run_id).status == "running"  # a page is pending: not drained
    assert pipeline.tally(CRAWL, run_id).done == PAGES - 1

    if pipeline.kind == "aws":
        MoveTasks.install(client("sqs"))
        where = ["--stage"]
    else:
        assert isinstance(pipeline.harness, LocalHarness)
        where = ["--state", str(pipeline.harness.store.folder)]
    capsys.readouterr()
    assert main(["redrive", *where]) == 0
    said = capsys.readouterr().out
    assert "2 message(s)" in said

    pipeline.drain()
    pipeline.finalize()
    run = pipeline.run_state(CRAWL, run_id)
    assert run.status == "finished"
    tally = pipeline.tally(CRAWL, run_id)
    assert (tally.done, tally.fetched, tally.records_new) == (PAGES, PAGES, BOOKS)
    records = pipeline.records(CRAWL, run_id)
    assert len(records) == len({r["_key"] for r in records}) == BOOKS
    summary = pipeline.summary(CRAWL, run_id)
    assert (summary["status"], summary["records"]["total"]) == ("finished", BOOKS)

    assert main(["redrive", *where]) == 0  # again: nothing left to move
    assert "nothing to redrive" in capsys.readouterr().out
    assert pipeline.dead_letters() == []

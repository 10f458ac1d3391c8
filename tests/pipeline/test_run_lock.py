"""One run per crawl at a time: a second start is refused naming the run in flight; after it, a new run opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluice.aws.clients import client
from sluice.aws.items import to_item
from sluice.aws.ledger import RunInFlight
from sluice.handlers import scheduler
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.runner import LocalRunner, StateInUse, _exclusive

CRAWL = "books"


def run_ids(pipeline: Any, crawl: str) -> list[str]:
    items = client("dynamodb").query(
        TableName=pipeline.settings.ledger_table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues=to_item({":p": f"crawl#{crawl}"}),
    )["Items"]
    return [i["run_id"]["S"] for i in items]


def test_second_run_while_one_is_in_flight_is_refused_naming_it(
    pipeline: Any, site: RunningDemoSite, books_spec: Any
) -> None:
    pipeline.spec(books_spec(CRAWL, site.base_url))
    first = pipeline.start(CRAWL)
    queued = pipeline.in_queue()

    with pytest.raises(RunInFlight) as refused:
        scheduler.handler({"crawl": CRAWL}, LocalContext(function_name="scheduler", timeout_s=900))  # type: ignore[arg-type]
    assert first in str(refused.value)
    assert repr(CRAWL) in str(refused.value)
    # Refused means untouched: no second run, nothing enqueued, the lock still names the first run.
    assert run_ids(pipeline, CRAWL) == [first]
    assert pipeline.in_queue() == queued
    assert pipeline.run_state(CRAWL, first).counters["enqueued"] == 5
    assert pipeline.services.ledger.active_run(CRAWL)["run_id"] == first

    # Another crawl is not held up by this one's lock.
    pipeline.spec(books_spec("other", site.base_url, pages=1))
    other = pipeline.start("other")
    assert pipeline.services.ledger.active_run("other")["run_id"] == other

    pipeline.drain()
    assert {f["run_id"] for f in pipeline.finalize()} == {first, other}
    assert pipeline.services.ledger.active_run(CRAWL) is None

    second = pipeline.start(CRAWL)
    assert second > first
    assert sorted(run_ids(pipeline, CRAWL)) == [first, second]
    assert pipeline.services.ledger.active_run(CRAWL)["run_id"] == second


def test_a_second_local_run_on_the_same_state_folder_is_refused(tmp_path: Path) -> None:
    spec = parse_spec(
        {"name": "books", "seeds": ["http://127.0.0.1:9/x.html"], "extract": {"fields": {"title": "h1::text"}}}
    )
    state = tmp_path / "state"
    state.mkdir()
    with _exclusive(state), pytest.raises(StateInUse, match="another sluice run is using"):
        LocalRunner(tmp_path, state).run(spec)

"""`sluice logs RUN`: a run's lines from its local file, or from CloudWatch Logs Insights (on moto)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from infra.config import DEFAULT

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.domain.runs import RunState
from sluice.settings import Settings
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.ops.logs import LogFilter, stage_lines
from sluice_tools.ops.stage import Stage, StageUnreachable

from .conftest import DEMO_SPEC, Cli, LocalCrawls

CRAWL = "demo-books"
SPECS = DEMO_SPEC.parent
"""A stage finds a run by trying each crawl it knows of: the specs folder names the demo crawl."""


def test_a_local_runs_lines_in_order_filtered_by_level_and_text(
    local: LocalCrawls, sluice: Cli, site: RunningDemoSite
) -> None:
    local.shrink(2)
    site.set_catalogue(broken_selector=True)
    run = local.run()["run_id"]
    where = ("--state", str(local.state))

    code, out, _ = sluice("logs", run, *where)
    assert code == 0
    messages = [line.split(maxsplit=3)[3].split("  ")[0] for line in out.splitlines()]
    assert messages[0] == "run opened"
    assert "batch done" in messages
    assert "run finalized" in messages
    assert "CloudWatchMetrics" not in out  # EMF documents are metrics, not log lines

    code, errors, _ = sluice("logs", run, *where, "--level", "ERROR")
    assert code == 0
    assert {tuple(line.split()[2:5]) for line in errors.splitlines()} == {("ERROR", "run", "alert")}
    assert "check=record_count_drop" in errors or "check=records_nonzero" in errors
    assert sluice("logs", run, *where, "--level", "error")[:2] == (0, errors)  # a level in lower case is the same

    code, grepped, _ = sluice("logs", run, *where, "--grep", "batch done", "--json")
    assert code == 0
    events = [json.loads(line) for line in grepped.splitlines()]
    assert events
    assert {e["message"] for e in events} == {"batch done"}
    assert {e["run_id"] for e in events} == {run}


def test_logs_of_an_unknown_run_are_refused(local: LocalCrawls, sluice: Cli) -> None:
    local.shrink(1)
    local.run()
    code, _, err = sluice("logs", "20200101T000000Z-000000", "--state", str(local.state))
    assert code == 2
    assert "no run 20200101T000000Z-000000" in err


def _finished_run(settings: Settings) -> RunState:
    ledger = DynamoRunLedger(settings.ledger_table)
    run = ledger.open_run(CRAWL, "digest", timedelta(hours=1), trigger=None, catalog_run=None)
    ledger.finish(CRAWL, run.run_id, healthy=True, complete=True, records=1, summary_key="k")
    finished = ledger.get_run(CRAWL, run.run_id)
    assert finished is not None
    return finished


def _put(group: str, *events: dict[str, Any]) -> None:
    logs = client("logs")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    now = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName="s",
        logEvents=[{"timestamp": now + i, "message": json.dumps(e)} for i, e in enumerate(events)],
    )


def test_a_stages_lines_come_from_one_insights_query_over_the_functions_groups(aws: Settings, sluice: Cli) -> None:
    run = _finished_run(aws)
    other = "20200101T000000Z-000000"
    line = {"timestamp": "2026-12-01 03:17:00,000+0000", "service": "sluice", "crawl": CRAWL}
    _put(
        f"/aws/lambda/{DEFAULT.name('scheduler')}",
        line | {"level": "INFO", "message": "run opened", "run_id": run.run_id},
        line | {"level": "INFO", "message": "run opened", "run_id": other},
    )
    _put(
        f"/aws/lambda/{DEFAULT.name('fetcher')}",
        {"type": "platform.start", "record": {"requestId": "r"}},  # Lambda's own lines carry no run
        line | {"level": "WARNING", "message": "page failed", "run_id": run.run_id, "url": "http://x.test/a.html"},
        line | {"level": "INFO", "message": "batch done", "run_id": run.run_id},
    )
    # No finalizer group: a function that never ran has none, and the query leaves it out.
    asked: list[dict[str, Any]] = []
    client("logs").meta.events.register(
        "provide-client-params.logs.StartQuery", lambda params, **_: asked.append(params)
    )

    code, out, err = sluice("logs", run.run_id, "--stage", "--specs", str(SPECS))
    assert code == 0, err
    assert [line.split()[3:] for line in out.splitlines()] == [
        ["scheduler", "run", "opened"],
        ["fetcher", "page", "failed", "url=http://x.test/a.html"],
        ["fetcher", "batch", "done"],
    ]
    (query,) = asked
    assert query["logGroupNames"] == [f"/aws/lambda/{DEFAULT.name(f)}" for f in ("scheduler", "fetcher")]
    assert f'filter run_id = "{run.run_id}"' in query["queryString"]
    assert query["startTime"] <= time.time() <= query["endTime"] + 1

    code, warnings, _ = sluice(
        "logs", run.run_id, "--stage", "--specs", str(SPECS), "--level", "WARNING", "--url", "x.test"
    )
    assert code == 0
    assert [line.split()[3:5] for line in warnings.splitlines()] == [["fetcher", "page"]]
    query = asked[-1]["queryString"]
    assert 'filter level in ["WARNING", "ERROR", "CRITICAL"]' in query
    assert 'filter url like "x.test"' in query


def test_the_insights_query_says_what_the_filters_say() -> None:
    query = LogFilter(level="ERROR", grep='say "hi"', limit=50).insights_query("20261201T000000Z-abcdef")
    assert query.splitlines() == [
        "fields @timestamp, @message, @log",
        '| filter run_id = "20261201T000000Z-abcdef"',
        '| filter level in ["ERROR", "CRITICAL"]',
        '| filter @message like "say \\"hi\\""',
        "| sort @timestamp asc",
        "| limit 50",
    ]


def test_a_query_insights_does_not_answer_in_time_is_stopped(aws: Settings) -> None:
    run = _finished_run(aws)
    _put(f"/aws/lambda/{DEFAULT.name('fetcher')}", {"level": "INFO", "message": "m", "run_id": run.run_id})
    logs = client("logs")
    stopped: list[str] = []
    logs.meta.events.register(
        "before-call.logs.GetQueryResults",
        lambda **_: (AWSResponse("", 200, {}, None), {"status": "Running", "results": []}),
    )

    logs.meta.events.register(
        "provide-client-params.logs.StopQuery", lambda params, **_: stopped.append(params["queryId"])
    )
    # moto has no StopQuery: answered here as AWS answers it.
    logs.meta.events.register(
        "before-call.logs.StopQuery", lambda **_: (AWSResponse("", 200, {}, None), {"success": True})
    )
    naps: list[float] = []
    with pytest.raises(StageUnreachable, match="had not answered after 0s"):
        stage_lines(Stage.named("dev"), run, LogFilter(), wait_s=0.05, poll_s=0.01, sleep=naps.append)
    assert len(stopped) == 1
    assert naps
    assert all(n == 0.01 for n in naps)

"""`sluice logs RUN`: a run's log lines, from the local run's JSON Lines file or CloudWatch Logs Insights.

Every pipeline log line is one JSON object carrying ``crawl`` and ``run_id`` (and ``url`` when it
is about one page), locally and in Lambda alike, so one filter serves both: on AWS it is the
Insights query's ``filter`` clauses, and applied again to what comes back.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters.aws.clients import client
from sluice.domain.runs import RunState
from sluice_tools.ops.history import NoSuchRun
from sluice_tools.ops.stage import Stage, StageUnreachable, aws_errors

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_SHOWN_ELSEWHERE = frozenset(
    {"level", "message", "timestamp", "location", "service", "crawl", "run_id", "exception", "exception_name"}
    | {"cold_start", "function_name", "function_arn", "function_memory_size", "function_request_id"}
    | {"xray_trace_id", "sampling_rate"}
)


@dataclass(frozen=True, slots=True)
class LogFilter:
    """Which lines to show: at least ``level``, containing ``grep``, about a URL containing ``url``."""

    level: str | None = None
    grep: str | None = None
    url: str | None = None
    limit: int = 1000

    def matches(self, event: dict[str, Any], line: str) -> bool:
        if self.level is not None and LEVELS.index(self.level) > _rank(event.get("level")):
            return False
        if self.grep is not None and self.grep not in line:
            return False
        return self.url is None or self.url in str(event.get("url", ""))

    def insights_query(self, run_id: str) -> str:
        """The same filter as a Logs Insights query over the functions' JSON lines, oldest first."""
        clauses = ["fields @timestamp, @message, @log", f"filter run_id = {_quoted(run_id)}"]
        if self.level is not None:
            wanted = ", ".join(_quoted(level) for level in LEVELS[LEVELS.index(self.level) :])
            clauses.append(f"filter level in [{wanted}]")
        if self.grep is not None:
            clauses.append(f"filter @message like {_quoted(self.grep)}")
        if self.url is not None:
            clauses.append(f"filter url like {_quoted(self.url)}")
        clauses += ["sort @timestamp asc", f"limit {self.limit}"]
        return "\n| ".join(clauses)


@dataclass(frozen=True, slots=True)
class LogLine:
    event: dict[str, Any]
    raw: str
    function: str | None = None
    """The Lambda function that wrote it (``fetcher``...), on AWS."""

    def text(self) -> str:
        e = self.event
        stamp = str(e.get("timestamp", "")).removesuffix("+0000")
        extra = "  ".join(
            f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in e.items() if k not in _SHOWN_ELSEWHERE
        )
        head = " ".join(p for p in (stamp, f"{e.get('level', ''):<7}", self.function, str(e.get("message", ""))) if p)
        lines = [f"{head}  {extra}" if extra else head]
        if e.get("exception"):
            lines += [f"    {line}" for line in str(e["exception"]).splitlines()]
        return "\n".join(lines)


def _rank(level: object) -> int:
    return LEVELS.index(level) if isinstance(level, str) and level in LEVELS else 0


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _events(lines: Iterable[str]) -> Iterator[tuple[dict[str, Any], str]]:
    """The log lines among ``lines``: JSON objects with a level (EMF metric documents are not log lines)."""
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and "level" in event and "_aws" not in event:
            yield event, line


def local_lines(log_file: Path, run: RunState, flt: LogFilter) -> list[LogLine]:
    """The run's lines from the file `sluice run` wrote, in the order written."""
    if not log_file.is_file():
        raise NoSuchRun(f"no log file for run {run.run_id}: {log_file} does not exist")
    with log_file.open(encoding="utf-8") as lines:
        found = [LogLine(e, raw) for e, raw in _events(line.rstrip("\n") for line in lines) if flt.matches(e, raw)]
    return found[: flt.limit]


def stage_lines(
    stage: Stage,
    run: RunState,
    flt: LogFilter,
    *,
    wait_s: float = 60.0,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[LogLine]:
    """The run's lines from the three functions' log groups, by one Logs Insights query polled at most ``wait_s``."""
    logs = client("logs")
    with aws_errors(stage.name, "list the functions' log groups"):
        prefix = f"/aws/lambda/{stage.config.name('')}"
        pages = logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix)
        existing = {g["logGroupName"] for page in pages for g in page.get("logGroups", [])}
    groups = [g for g in stage.log_groups if g in existing]  # a function that never ran may have no group yet
    if not groups:
        raise StageUnreachable(f"none of {', '.join(stage.log_groups)} exists: is stage {stage.name!r} deployed here?")
    start = datetime.fromisoformat(run.started_at) - timedelta(minutes=1)
    end = datetime.fromisoformat(run.finished_at) + timedelta(minutes=15) if run.finished_at else None
    now = math.ceil(time.time())  # whole seconds: a line written this second is still in range
    with aws_errors(stage.name, "query the functions' logs (Logs Insights)"):
        query = logs.start_query(
            logGroupNames=groups,
            startTime=int(start.timestamp()),
            endTime=int(min(end.timestamp(), now) if end else now),
            queryString=flt.insights_query(run.run_id),
        )["queryId"]
        deadline = time.monotonic() + wait_s
        while (answer := logs.get_query_results(queryId=query))["status"] in ("Scheduled", "Running"):
            if time.monotonic() >= deadline:
                with suppress(ClientError):  # it may have ended meanwhile: the answer is late either way
                    logs.stop_query(queryId=query)
                raise StageUnreachable(
                    f"Logs Insights had not answered after {wait_s:.0f}s: try again, or narrow it (--level, --grep)"
                )
            sleep(poll_s)
    if answer["status"] != "Complete":
        raise StageUnreachable(f"the Logs Insights query ended {answer['status']}")
    rows = [{f["field"]: f["value"] for f in result} for result in answer.get("results", [])]
    rows.sort(key=lambda r: _moment(r.get("@timestamp", "")))
    found = []
    for row in rows:
        for event, raw in _events([row.get("@message", "")]):
            # Applied again here: the query said the same, but a line that does not match is never shown.
            if event.get("run_id") == run.run_id and flt.matches(event, raw):
                found.append(LogLine(event, raw, _function(row.get("@log", ""), stage)))
    return found[: flt.limit]


def _moment(stamp: str) -> tuple[int, str]:
    """Insights gives ``2026-12-01 12:34:02.640``; some emulators epoch milliseconds: each sorts in time order."""
    return (int(stamp), "") if stamp.isdigit() else (0, stamp)


def _function(log: str, stage: Stage) -> str | None:
    """``fetcher`` from ``ACCOUNT:/aws/lambda/sluice-dev-fetcher``."""
    name = log.rsplit("/", 1)[-1]
    prefix = stage.config.name("")
    return name.removeprefix(prefix) if name.startswith(prefix) else None

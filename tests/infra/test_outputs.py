"""Stack outputs: everything the runbook and the query guide tell an operator to look up, by those names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra.stack import SluiceStack

from .conftest import render

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def outputs(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = template.to_json()["Outputs"]
    return found


def _ref(stack: SluiceStack, construct: Any) -> str:
    return f"<{stack.get_logical_id(construct.node.default_child)}>"


def _expected(stack: SluiceStack) -> dict[str, str]:
    """Each output and the resource it must point at, as ``render`` shows it."""
    bucket, ledger = _ref(stack, stack.storage.bucket), _ref(stack, stack.storage.ledger)
    frontier, dead = _ref(stack, stack.queues.frontier), _ref(stack, stack.queues.dead_letters)
    dashboard = _ref(stack, stack.monitoring.dashboard)
    return {
        "RecordsBucket": bucket,
        "LedgerTable": ledger,
        "RecordsTable": _ref(stack, stack.storage.records),
        "FrontierQueue": frontier,
        "FrontierQueueArn": f"{frontier}.Arn",
        "DeadLetterQueue": dead,
        "DeadLetterQueueArn": f"{dead}.Arn",
        "SchedulerFunction": _ref(stack, stack.functions.scheduler),
        "AlarmTopic": _ref(stack, stack.monitoring.topic),
        "Dashboard": dashboard,
        "DashboardUrl": f"https://console.aws.amazon.com/cloudwatch/home?region=<AWS::Region>#dashboards:name={dashboard}",
        "GlueDatabase": f"<{stack.get_logical_id(stack.catalog.database)}>",
        "QueryWorkgroup": f"<{stack.get_logical_id(stack.query.workgroup)}>",
        "QueryPolicy": _ref(stack, stack.query.policy),
        "ParquetCopyWorkgroup": f"<{stack.get_logical_id(stack.query.copy_workgroup)}>",
    }


@pytest.mark.parametrize(
    "name",
    [
        "RecordsBucket",
        "LedgerTable",
        "RecordsTable",
        "FrontierQueue",
        "FrontierQueueArn",
        "DeadLetterQueue",
        "DeadLetterQueueArn",
        "SchedulerFunction",
        "AlarmTopic",
        "Dashboard",
        "DashboardUrl",
        "GlueDatabase",
        "QueryWorkgroup",
        "QueryPolicy",
        "ParquetCopyWorkgroup",
    ],
)
def test_output_points_at_its_resource(stack: SluiceStack, outputs: dict[str, Any], name: str) -> None:
    assert render(outputs[name]["Value"]) == _expected(stack)[name]
    assert outputs[name]["Description"]


@pytest.mark.parametrize("doc", ["operations.md", "querying.md"])
def test_every_output_the_docs_name_exists(outputs: dict[str, Any], doc: str) -> None:
    named = set(re.findall(r"`(\w+)` (?:stack )?output", (DOCS / doc).read_text(encoding="utf-8")))
    assert named
    assert named <= set(outputs)


def test_the_runbook_lists_every_output(outputs: dict[str, Any]) -> None:
    runbook = (DOCS / "operations.md").read_text(encoding="utf-8")
    section = runbook.split("\n## Stack outputs\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)) == set(outputs)

"""The dashboard: cost and blocked hosts per run for each crawl, from what the code really emits and logs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from infra.app import context
from infra.config import DEFAULT
from infra.crawls import deployed_specs
from infra.monitoring import HOST_BLOCKED_LOG
from infra.stack import SluiceStack

from sluice.domain.hosts import HostState
from sluice.fetch.politeness import HostGate
from sluice.metrics import CRAWL_DIMENSION, NAMESPACE, RunMetric
from sluice.spec import CrawlSpec, parse_spec
from sluice.spec.models import Breaker

from .conftest import render

SPECS = deployed_specs()
VISIT = Path(__file__).resolve().parents[2] / "functions" / "sluice" / "pipeline" / "visit" / "batch.py"


@pytest.fixture(scope="module")
def widgets(resources: dict[str, Any]) -> list[dict[str, Any]]:
    (dashboard,) = (r["Properties"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard")
    found: list[dict[str, Any]] = json.loads(render(dashboard["DashboardBody"]))["widgets"]
    return found


def _metrics(widgets: list[dict[str, Any]]) -> list[list[Any]]:
    return [m for w in widgets if w["type"] == "metric" for m in w["properties"]["metrics"]]


def _log_query(widgets: list[dict[str, Any]]) -> str:
    (widget,) = (w for w in widgets if w["type"] == "log")
    query: str = widget["properties"]["query"]
    return query


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_crawl_shows_its_estimated_cost_per_run(widgets: list[dict[str, Any]], spec: CrawlSpec) -> None:
    assert [NAMESPACE, RunMetric.ESTIMATED_COST.value, CRAWL_DIMENSION, spec.name] in [m[:4] for m in _metrics(widgets)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_crawl_shows_its_hosts_blocked_per_run(widgets: list[dict[str, Any]], spec: CrawlSpec) -> None:
    assert [NAMESPACE, RunMetric.HOSTS_BLOCKED.value, CRAWL_DIMENSION, spec.name] in [m[:4] for m in _metrics(widgets)]


def test_every_run_metric_on_the_dashboard_is_one_the_finalizer_emits(widgets: list[dict[str, Any]]) -> None:
    ours = [m for m in _metrics(widgets) if m[0] == NAMESPACE]
    assert ours
    assert {m[1] for m in ours} <= {m.value for m in RunMetric}
    assert {tuple(m[2:4]) for m in ours} == {(CRAWL_DIMENSION, s.name) for s in SPECS}


def test_blocked_hosts_table_reads_the_fetchers_log(widgets: list[dict[str, Any]], stack: SluiceStack) -> None:
    log_group = stack.get_logical_id(stack.functions.fetcher.log_group.node.default_child)  # type: ignore[arg-type]
    query = _log_query(widgets)
    assert query.startswith(f"SOURCE '<{log_group}>'")
    assert f'filter message = "{HOST_BLOCKED_LOG}"' in query


def test_the_fetcher_logs_the_line_the_table_filters_on() -> None:
    source = VISIT.read_text(encoding="utf-8")
    assert f'logger.warning("{HOST_BLOCKED_LOG}"' in source


def test_blocked_hosts_table_parses_the_breakers_own_reason(widgets: list[dict[str, Any]]) -> None:
    """The breaker's reason, made by the real gate, yields the refusal, counts and share the table shows."""
    host, run_id = "books.example", "20261201T021500Z-1a2b3c"
    gate = HostGate(4, 2, breaker=Breaker(min_answers=5, max_blocked_share=0.5))
    gate.adopt(run_id, {host: HostState(host)})
    for _ in range(5):
        gate.answered(host, 403, 0.1)
    (state,) = gate.export(run_id, [host])
    reason = state.counts(run_id).tripped
    assert reason is not None
    (parse,) = (line for line in _log_query(widgets).splitlines() if line.startswith("| parse reason /"))
    pattern = parse.removeprefix("| parse reason /").removesuffix("/").replace("(?<", "(?P<")
    found = re.search(pattern, reason)
    assert found is not None, reason
    assert (found["refused"], found["answers"], found["share"]) == ("5", "5", "100%")
    assert found["refusal"]


def test_a_crawl_seeded_from_sitemaps_shows_its_pages_not_due(widgets: list[dict[str, Any]]) -> None:
    spec = parse_spec(
        {
            "name": "from-sitemaps",
            "schedule": "cron(0 2 * * ? *)",
            "seeds": {"sitemaps": {"urls": ["https://example.com/sitemap.xml"]}},
            "extract": {"fields": {"title": "h1::text"}},
        }
    )
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = SluiceStack(app, "Sluice-sitemaps", config=DEFAULT, specs=[spec])
    (dashboard,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    shown = {m[1] for m in _metrics(json.loads(render(dashboard["Properties"]["DashboardBody"]))["widgets"])}
    assert RunMetric.PAGES_NOT_DUE.value in shown
    without = {m[1] for m in _metrics(widgets)}
    assert RunMetric.PAGES_NOT_DUE.value not in without  # the shipped crawls read no sitemaps


def test_a_crawl_with_a_recrawl_schedule_shows_its_pages_not_due() -> None:
    spec = parse_spec(
        {
            "name": "nightly",
            "schedule": "cron(0 2 * * ? *)",
            "seeds": ["https://example.com/catalogue/page-1.html"],
            "extract": {"fields": {"title": "h1::text"}},
            "recrawl": {"max_age_days": 7},
        }
    )
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = SluiceStack(app, "Sluice-recrawl", config=DEFAULT, specs=[spec])
    (dashboard,) = Template.from_stack(stack).find_resources("AWS::CloudWatch::Dashboard").values()
    shown = {m[1] for m in _metrics(json.loads(render(dashboard["Properties"]["DashboardBody"]))["widgets"])}
    assert RunMetric.PAGES_NOT_DUE.value in shown

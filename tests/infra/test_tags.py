"""Tags: project and stage on the stack and everything in it that takes tags, the crawl on per-crawl resources."""

from __future__ import annotations

import dataclasses
from typing import Any

import aws_cdk as cdk
import pytest
from infra.app import context
from infra.config import CRAWL_TAG, DEFAULT
from infra.crawls import deployed_specs
from infra.monitoring import ALARMS_PER_CRAWL, PIPELINE_ALARMS
from infra.stack import SluiceStack

from sluice.spec import CrawlSpec

SPECS = deployed_specs()


def _tags(properties: dict[str, Any]) -> dict[str, str]:
    """A resource's tags, whichever of CloudFormation's two shapes (a list of Key/Value, or a map) it uses."""
    tags = properties.get("Tags", [])
    if isinstance(tags, list):
        return {t["Key"]: t["Value"] for t in tags}
    return dict(tags)


def _taggable(stack: SluiceStack) -> list[str]:
    """Logical ids of every resource whose CloudFormation type takes tags, as the CDK knows it."""
    return [
        stack.get_logical_id(c)
        for c in stack.node.find_all()
        # Older L1 classes implement ITaggable, newer ones (rules, alarms, dashboards) ITaggableV2.
        if isinstance(c, cdk.CfnResource) and (cdk.TagManager.is_taggable(c) or cdk.TagManager.is_taggable_v2(c))
    ]


def test_every_taggable_resource_carries_project_and_stage(stack: SluiceStack, resources: dict[str, Any]) -> None:
    taggable = _taggable(stack)
    assert len(taggable) >= 30  # tables, buckets, queues, functions, roles, the key, topic, rules, alarms
    for logical in taggable:
        tags = _tags(resources[logical].get("Properties", {}))
        assert {k: tags.get(k) for k in ("project", "stage")} == {"project": "sluice", "stage": "dev"}, logical


def test_the_stack_itself_carries_project_and_stage(stack: SluiceStack) -> None:
    """Stack tags reach resources CloudFormation tags on deploy, and the account's views of stacks."""
    assert stack.tags.tag_values() == {"project": "sluice", "stage": DEFAULT.stage}


def test_another_stage_tags_its_stage() -> None:
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = SluiceStack(app, "Sluice-prod", config=dataclasses.replace(DEFAULT, stage="prod"), specs=[])
    assert stack.tags.tag_values()["stage"] == "prod"


@pytest.mark.parametrize("spec", [s for s in SPECS if s.schedule], ids=lambda s: s.name)
def test_a_crawls_schedule_carries_its_crawl(resources: dict[str, Any], spec: CrawlSpec) -> None:
    (rule,) = (
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Events::Rule" and r["Properties"].get("Name") == DEFAULT.name(f"schedule-{spec.name}")
    )
    assert _tags(rule)[CRAWL_TAG] == spec.name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_crawls_alarms_carry_its_crawl(resources: dict[str, Any], spec: CrawlSpec) -> None:
    alarms = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["AlarmName"].startswith(DEFAULT.name(spec.name))
    ]
    assert len(alarms) >= 4
    for alarm in alarms:
        assert _tags(alarm)[CRAWL_TAG] == spec.name, alarm["AlarmName"]


def test_pipeline_alarms_carry_no_crawl(resources: dict[str, Any]) -> None:
    alarm = next(
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["AlarmName"] == DEFAULT.name("dead-letters")
    )
    assert CRAWL_TAG not in _tags(alarm)


def test_alarm_counts_are_what_the_cost_doc_prices(resources: dict[str, Any]) -> None:
    """docs/costs.md prices ALARMS_PER_CRAWL (+1 when scheduled) and PIPELINE_ALARMS: they are the template's."""
    alarms = [a["Properties"] for a in resources.values() if a["Type"] == "AWS::CloudWatch::Alarm"]
    pipeline = [a for a in alarms if CRAWL_TAG not in _tags(a)]
    assert len(pipeline) == PIPELINE_ALARMS
    for spec in deployed_specs():
        mine = [a for a in alarms if _tags(a).get(CRAWL_TAG) == spec.name]
        assert len(mine) == ALARMS_PER_CRAWL + (1 if spec.schedule else 0), spec.name

"""The CDK app synthesized once per session, bundling skipped (no pip, no Docker): tests read its template."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template
from infra.app import build, context
from infra.stack import SluiceStack


@pytest.fixture(scope="session")
def stack() -> SluiceStack:
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com"})
    built = build(app)
    app.synth()  # runs cdk-nag: an unacknowledged finding raises here
    return built


@pytest.fixture(scope="session")
def template(stack: SluiceStack) -> Template:
    return Template.from_stack(stack)


@pytest.fixture(scope="session")
def resources(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = template.to_json()["Resources"]
    return found


def render(value: Any) -> str:
    """A template value as text: ``Fn::Join`` flattened, ``Ref`` as ``<Id>``, ``GetAtt`` as ``<Id>.Arn``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return f"<{logical}>.{attribute}"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(render(p) for p in parts)
    raise AssertionError(f"not a string the tests can read: {value!r}")


@pytest.fixture(scope="session")
def bucket_ref(stack: SluiceStack) -> str:
    """The records bucket as ``render`` shows a ``Ref`` to it."""
    return f"<{stack.get_logical_id(stack.storage.bucket.node.default_child)}>"  # type: ignore[arg-type]

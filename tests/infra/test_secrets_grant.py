"""The fetcher reads exactly the secrets the deployed specs name, none when none does; no value is in the template."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from infra.app import context
from infra.config import DEFAULT
from infra.crawls import deployed_specs
from infra.nag import acknowledge
from infra.stack import SluiceStack
from moto import mock_aws

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.secrets import AwsSecrets
from sluice.domain.secrets import is_ssm, local_variable, ssm_parameter
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.emulate import grants
from sluice_tools.emulate.resources import fake_credentials

SECRET_ACTIONS = ("secretsmanager:", "ssm:", "kms:")
VALUES = {
    "shop/session": "test-session-not-a-secret",
    "ssm:/shop/staff-password": "test-password-not-a-secret",
    "shop/api-token": "test-token-not-a-secret",
}


def _spec(name: str, request: dict[str, Any]) -> CrawlSpec:
    return parse_spec(
        {
            "name": name,
            "seeds": [f"https://{name}.example/catalogue/page-1.html"],
            "extract": {"fields": {"title": "h1"}},
            "request": request,
        }
    )


SPECS = [
    _spec(
        "shop",
        {
            "cookies": {"session": {"secret": "shop/session"}},
            "basic_auth": {"username": "reader", "password": {"secret": "ssm:/shop/staff-password"}},
        },
    ),
    _spec("shop-api", {"headers": {"X-Api-Token": {"secret": "shop/api-token"}, "Accept-Language": "en"}}),
    _spec("shop-again", {"cookies": {"session": {"secret": "shop/session"}}}),  # a secret two specs share
]


@pytest.fixture(scope="module")
def template_json() -> dict[str, Any]:
    """The stack with the shipped specs and three that name secrets, synthesized with cdk-nag, their values set."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in VALUES.items():
            patch.setenv(local_variable(name), value)  # where a careless synth would find them
        app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com"})
        stack = SluiceStack(app, "Sluice-dev", config=DEFAULT, specs=[*deployed_specs(), *SPECS])
        acknowledge(stack)
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        app.synth()  # cdk-nag: an unacknowledged finding raises here
        found = dict(Template.from_stack(stack).to_json())
    return found


def _secret_statements(resources: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each function's statements on secrets, parameters or keys, by function."""
    found: dict[str, list[dict[str, Any]]] = {}
    for logical, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        function = next((f for f in ("Scheduler", "Fetcher", "Finalizer") if logical.startswith(f"Functions{f}")), "")
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith(SECRET_ACTIONS) for a in actions):
                found.setdefault(function or logical, []).append(statement)
    return found


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _arn(resource: Any) -> str:
    """``arn:aws:...`` of a Fn::Join of partition, region and account, with those three left as placeholders."""
    parts = resource["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else "<" + next(iter(p.values())).split("::")[-1] + ">" for p in parts)


def test_the_fetcher_alone_reads_exactly_the_named_secrets(template_json: dict[str, Any]) -> None:
    statements = _secret_statements(template_json["Resources"])
    assert set(statements) == {"Fetcher"}
    granted = {
        action: sorted(_arn(r) for r in _listed(statement["Resource"]))
        for statement in statements["Fetcher"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert granted == {
        "secretsmanager:GetSecretValue": [
            "arn:<Partition>:secretsmanager:<Region>:<AccountId>:secret:shop/api-token-??????",
            "arn:<Partition>:secretsmanager:<Region>:<AccountId>:secret:shop/session-??????",
        ],
        "ssm:GetParameter": ["arn:<Partition>:ssm:<Region>:<AccountId>:parameter/shop/staff-password"],
    }


def test_no_secret_value_is_in_the_template(template_json: dict[str, Any]) -> None:
    text = json.dumps(template_json)
    for value in VALUES.values():
        assert value not in text


def test_a_stack_whose_specs_name_no_secret_grants_none(resources: dict[str, Any]) -> None:
    """The shipped specs name none: no function may read any secret, parameter or key."""
    assert _secret_statements(resources) == {}


def test_the_grant_matches_the_stores_arns_and_is_enough_to_read_them(template_json: dict[str, Any]) -> None:
    """The grant's ARNs match the stores' own (a secret's ends in a random suffix) and no other secret's;
    read as the fetcher's role with IAM enforced, the actions are the ones the adapter calls."""
    with pytest.MonkeyPatch.context() as patch, mock_aws():
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
            patch.setenv(name, "testing")
        fake_credentials()
        arns = {}
        for name, value in VALUES.items():
            if is_ssm(name):
                client("ssm").put_parameter(Name=ssm_parameter(name), Value=value, Type="SecureString")
                arns[name] = client("ssm").get_parameter(Name=ssm_parameter(name))["Parameter"]["ARN"]
            else:
                arns[name] = client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"]
        other = client("secretsmanager").create_secret(Name="shop/other", SecretString="test-other-not-a-secret")
        policies = grants.function_policies(template_json["Resources"], "unused-bucket")
        fetcher = policies[DEFAULT.name("fetcher")]
        granted = [
            r
            for s in fetcher["Statement"]
            if any(str(a).startswith(SECRET_ACTIONS) for a in _listed(s["Action"]))
            for r in _listed(s["Resource"])
        ]
        for name, arn in arns.items():  # IAM's '?' is one character, as fnmatch's
            assert sum(fnmatch.fnmatchcase(arn, pattern) for pattern in granted) == 1, (name, arn, granted)
        assert not any(fnmatch.fnmatchcase(other["ARN"], pattern) for pattern in granted)
        keys = grants.create_users({"fetcher": fetcher})
        with grants.enforced(), grants.acting_as(keys["fetcher"]):  # the actions are those the adapter calls
            secrets = AwsSecrets()
            assert {name: secrets.read(name) for name in VALUES} == VALUES


def test_the_scheduler_reads_the_secrets_of_the_specs_that_read_sitemaps_and_no_other() -> None:
    """It asks for the sitemaps with the spec's request section, as the fetcher asks for the pages."""
    mapped = parse_spec(
        {
            "name": "shop-maps",
            "seeds": {"sitemaps": ["https://shop-maps.example/sitemap.xml"]},
            "extract": {"fields": {"title": "h1"}},
            "request": {"headers": {"X-Api-Token": {"secret": "shop/api-token"}}},
        }
    )
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com"})
    stack = SluiceStack(app, "Sluice-dev", config=DEFAULT, specs=[*SPECS, mapped])
    statements = _secret_statements(Template.from_stack(stack).to_json()["Resources"])
    assert set(statements) == {"Fetcher", "Scheduler"}
    [statement] = statements["Scheduler"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert [_arn(r) for r in _listed(statement["Resource"])] == [
        "arn:<Partition>:secretsmanager:<Region>:<AccountId>:secret:shop/api-token-??????"
    ]

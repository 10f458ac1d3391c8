"""``egress: fixed``: the fetcher in private subnets behind NAT gateways with Elastic IPs, one property per test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from infra.app import build, context, stack_config
from infra.config import DEFAULT, StackConfig
from infra.crawls import deployed_specs
from infra.nag import acknowledge
from infra.stack import SluiceStack

from sluice.spec import parse_spec

from .conftest import render

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _synth(extra: dict[str, Any]) -> SluiceStack:
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com", **extra})
    built = build(app)
    app.synth()  # runs cdk-nag: an unacknowledged finding raises here
    return built


@pytest.fixture(scope="module")
def fixed() -> SluiceStack:
    """The stack with ``-c egress=fixed -c nat_gateways=2``: one NAT gateway per zone."""
    return _synth({"egress": "fixed", "nat_gateways": "2"})


@pytest.fixture(scope="module")
def fixed_resources(fixed: SluiceStack) -> dict[str, Any]:
    found: dict[str, Any] = Template.from_stack(fixed).to_json()["Resources"]
    return found


@pytest.fixture(scope="module")
def fixed_outputs(fixed: SluiceStack) -> dict[str, Any]:
    found: dict[str, Any] = Template.from_stack(fixed).to_json()["Outputs"]
    return found


def of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def _logical(stack: SluiceStack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


def _function(resources: dict[str, Any], name: str) -> dict[str, Any]:
    functions = of_type(resources, "AWS::Lambda::Function").values()
    return next(f["Properties"] for f in functions if f["Properties"].get("FunctionName") == name)


def _subnets(stack: SluiceStack, public: bool) -> set[str]:
    assert stack.egress is not None
    subnets = stack.egress.vpc.public_subnets if public else stack.egress.vpc.private_subnets
    return {_logical(stack, s) for s in subnets}


def _route_tables(stack: SluiceStack, public: bool) -> set[str]:
    assert stack.egress is not None
    subnets = stack.egress.vpc.public_subnets if public else stack.egress.vpc.private_subnets
    return {s.route_table.route_table_id for s in subnets}


def _refs(value: Any) -> set[str]:
    return {item["Ref"] for item in value}


# -- the default is unchanged ----------------------------------------------------------------------


def test_the_default_stack_has_no_vpc_and_no_function_in_one(resources: dict[str, Any]) -> None:
    assert not of_type(resources, "AWS::EC2::VPC")
    assert not of_type(resources, "AWS::EC2::EIP")
    assert all("VpcConfig" not in f["Properties"] for f in of_type(resources, "AWS::Lambda::Function").values())


def test_the_default_functions_say_their_egress_is_direct(resources: dict[str, Any]) -> None:
    env = _function(resources, DEFAULT.name("fetcher"))["Environment"]["Variables"]
    assert env["SLUICE_EGRESS"] == "direct"
    assert env["SLUICE_EGRESS_IPS"] == ""


# -- subnets and routes ----------------------------------------------------------------------------


def test_two_public_and_two_private_subnets_none_gives_out_public_addresses(
    fixed: SluiceStack, fixed_resources: dict[str, Any]
) -> None:
    subnets = of_type(fixed_resources, "AWS::EC2::Subnet")
    assert set(subnets) == _subnets(fixed, public=True) | _subnets(fixed, public=False)
    assert (len(_subnets(fixed, public=True)), len(_subnets(fixed, public=False))) == (2, 2)
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())


def test_the_private_subnets_default_route_is_a_nat_gateway_and_the_public_ones_the_internet_gateway(
    fixed: SluiceStack, fixed_resources: dict[str, Any]
) -> None:
    defaults = [
        r["Properties"]
        for r in of_type(fixed_resources, "AWS::EC2::Route").values()
        if r["Properties"]["DestinationCidrBlock"] == "0.0.0.0/0"
    ]
    private = [render(r["RouteTableId"]) for r in defaults if "NatGatewayId" in r]
    public = [render(r["RouteTableId"]) for r in defaults if "GatewayId" in r]
    assert sorted(private) == sorted(f"<{t['Ref']}>" for t in map(fixed.resolve, _route_tables(fixed, False)))
    assert sorted(public) == sorted(f"<{t['Ref']}>" for t in map(fixed.resolve, _route_tables(fixed, True)))
    assert len(defaults) == 4


def test_each_nat_gateway_sits_in_a_public_subnet_with_one_of_the_stacks_elastic_ips(
    fixed: SluiceStack, fixed_resources: dict[str, Any]
) -> None:
    gateways = [g["Properties"] for g in of_type(fixed_resources, "AWS::EC2::NatGateway").values()]
    addresses = of_type(fixed_resources, "AWS::EC2::EIP")
    assert len(gateways) == 2
    assert {g["SubnetId"]["Ref"] for g in gateways} == _subnets(fixed, public=True)
    assert sorted(g["AllocationId"]["Fn::GetAtt"][0] for g in gateways) == sorted(addresses)
    assert all(a["Properties"]["Domain"] == "vpc" for a in addresses.values())


def test_one_nat_gateway_serves_both_private_subnets_when_asked_for_one() -> None:
    stack = _synth({"egress": "fixed"})
    resources = Template.from_stack(stack).to_json()["Resources"]
    gateways = list(of_type(resources, "AWS::EC2::NatGateway"))
    routes = [
        r["Properties"] for r in of_type(resources, "AWS::EC2::Route").values() if "NatGatewayId" in r["Properties"]
    ]
    assert len(gateways) == 1
    assert len(of_type(resources, "AWS::EC2::EIP")) == 1
    assert [r["NatGatewayId"]["Ref"] for r in routes] == gateways * 2


# -- endpoints -------------------------------------------------------------------------------------


def test_dynamodb_and_s3_go_through_gateway_endpoints_on_the_private_route_tables(
    fixed: SluiceStack, fixed_resources: dict[str, Any]
) -> None:
    endpoints = [e["Properties"] for e in of_type(fixed_resources, "AWS::EC2::VPCEndpoint").values()]
    services = sorted(render(e["ServiceName"]).rsplit(".", 1)[1] for e in endpoints)
    assert services == ["dynamodb", "s3"]
    assert all(e["VpcEndpointType"] == "Gateway" for e in endpoints)
    private = {fixed.resolve(t)["Ref"] for t in _route_tables(fixed, public=False)}
    assert all(_refs(e["RouteTableIds"]) == private for e in endpoints)


def test_sqs_and_secrets_manager_have_no_interface_endpoint(fixed_resources: dict[str, Any]) -> None:
    """They go out through NAT: cheaper at a crawl's bytes than an endpoint's hours (docs/costs.md)."""
    endpoints = of_type(fixed_resources, "AWS::EC2::VPCEndpoint").values()
    assert [e for e in endpoints if e["Properties"].get("VpcEndpointType") == "Interface"] == []


# -- flow logs and security group ------------------------------------------------------------------


def test_the_vpc_logs_every_flow(fixed: SluiceStack, fixed_resources: dict[str, Any]) -> None:
    assert fixed.egress is not None
    (flow,) = (f["Properties"] for f in of_type(fixed_resources, "AWS::EC2::FlowLog").values())
    assert (flow["ResourceType"], flow["TrafficType"]) == ("VPC", "ALL")
    assert flow["ResourceId"] == {"Ref": _logical(fixed, fixed.egress.vpc)}
    assert flow["LogDestinationType"] == "cloud-watch-logs"


def test_the_fetchers_security_group_is_egress_only_and_tcp_only(fixed_resources: dict[str, Any]) -> None:
    assert not of_type(fixed_resources, "AWS::EC2::SecurityGroupIngress")
    groups = [g["Properties"] for g in of_type(fixed_resources, "AWS::EC2::SecurityGroup").values()]
    (group,) = groups
    assert "SecurityGroupIngress" not in group
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "The sites and the AWS APIs",
            "FromPort": 0,
            "IpProtocol": "tcp",
            "ToPort": 65535,
        }
    ]


# -- the functions ---------------------------------------------------------------------------------


def test_the_fetcher_runs_in_the_private_subnets_in_the_egress_group(
    fixed: SluiceStack, fixed_resources: dict[str, Any]
) -> None:
    assert fixed.egress is not None
    config = _function(fixed_resources, DEFAULT.name("fetcher"))["VpcConfig"]
    assert _refs(config["SubnetIds"]) == _subnets(fixed, public=False)
    assert [g["Fn::GetAtt"][0] for g in config["SecurityGroupIds"]] == [_logical(fixed, fixed.egress.security_group)]


def test_the_scheduler_and_finalizer_stay_out_of_the_vpc_when_no_spec_reads_sitemaps(
    fixed_resources: dict[str, Any],
) -> None:
    assert "VpcConfig" not in _function(fixed_resources, DEFAULT.scheduler_function)
    assert "VpcConfig" not in _function(fixed_resources, DEFAULT.finalizer_function)


def test_the_scheduler_joins_the_vpc_when_a_spec_reads_sitemaps() -> None:
    """It fetches the sitemaps, so its requests must leave from the same addresses as the fetcher's."""
    sitemaps = parse_spec(
        {
            "name": "mapped",
            "seeds": {"sitemaps": ["https://mapped.example/sitemap.xml"]},
            "extract": {"fields": {"title": "h1"}},
        }
    )
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com"})
    config = StackConfig(egress="fixed")
    stack = SluiceStack(app, "Sluice-dev", config=config, specs=[*deployed_specs(), sitemaps])
    acknowledge(stack)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert "VpcConfig" in _function(resources, DEFAULT.scheduler_function)
    assert "VpcConfig" in _function(resources, DEFAULT.name("fetcher"))
    assert "VpcConfig" not in _function(resources, DEFAULT.finalizer_function)


def test_the_functions_know_their_egress_and_its_addresses(fixed: SluiceStack, fixed_resources: dict[str, Any]) -> None:
    env = _function(fixed_resources, DEFAULT.name("fetcher"))["Environment"]["Variables"]
    addresses = sorted(of_type(fixed_resources, "AWS::EC2::EIP"))
    assert env["SLUICE_EGRESS"] == "fixed"
    assert env["SLUICE_EGRESS_IPS"] == {"Fn::Join": [",", [{"Fn::GetAtt": [a, "PublicIp"]} for a in addresses]]}


# -- outputs ---------------------------------------------------------------------------------------


def test_each_elastic_ip_is_an_output_and_all_of_them_on_one_line(
    fixed_resources: dict[str, Any], fixed_outputs: dict[str, Any]
) -> None:
    addresses = sorted(of_type(fixed_resources, "AWS::EC2::EIP"))
    assert [fixed_outputs[f"EgressIp{n}"]["Value"] for n in (1, 2)] == [
        {"Fn::GetAtt": [a, "PublicIp"]} for a in addresses
    ]
    assert fixed_outputs["EgressIps"]["Value"] == {
        "Fn::Join": [",", [{"Fn::GetAtt": [a, "PublicIp"]} for a in addresses]]
    }


def test_the_runbook_lists_every_egress_output(fixed_outputs: dict[str, Any], outputs_default: set[str]) -> None:
    runbook = (DOCS / "operations.md").read_text(encoding="utf-8")
    section = runbook.split("\n## Fixed egress\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))
    assert listed == set(fixed_outputs) - outputs_default


@pytest.fixture(scope="module")
def outputs_default(template: Template) -> set[str]:
    return set(template.to_json()["Outputs"])


# -- the setting -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"egress": "static"}, "egress 'static': one of direct, fixed"),
        ({"egress": "fixed", "nat_gateways": "3"}, "nat_gateways 3: from 1 (one address) to 2 (one per zone)"),
        ({"egress": "fixed", "nat_gateways": "0"}, "nat_gateways 0: from 1"),
    ],
)
def test_a_bad_egress_setting_is_refused_naming_it(extra: dict[str, str], message: str) -> None:
    app = cdk.App(context={**context(), **extra})
    with pytest.raises(SystemExit, match=re.escape(message)):
        stack_config(app)

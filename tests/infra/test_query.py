"""The Athena workgroup holds its limits, and the query policy grants what querying takes and nothing more."""

from __future__ import annotations

from typing import Any

import pytest
from infra.config import DEFAULT
from infra.crawls import deployed_specs

from sluice.spec.columns import table_name

from .conftest import render

SPECS = deployed_specs()


def _of_type(resources: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in resources.values() if r["Type"] == kind]


@pytest.fixture(scope="module")
def workgroup(resources: dict[str, Any]) -> dict[str, Any]:
    (found,) = _of_type(resources, "AWS::Athena::WorkGroup")
    return found


@pytest.fixture(scope="module")
def policy(resources: dict[str, Any]) -> list[dict[str, Any]]:
    """The query policy's statements."""
    (found,) = _of_type(resources, "AWS::IAM::ManagedPolicy")
    statements: list[dict[str, Any]] = found["PolicyDocument"]["Statement"]
    return statements


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _grants(statements: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Every (action, resource) pair the statements allow, resources rendered as text."""
    return {
        (action, render(resource))
        for s in statements
        if s["Effect"] == "Allow"
        for action in _listed(s["Action"])
        for resource in _listed(s["Resource"])
    }


# -- the workgroup -------------------------------------------------------------------------------


def test_workgroup_is_named_for_the_stage(workgroup: dict[str, Any]) -> None:
    assert workgroup["Name"] == DEFAULT.workgroup == "sluice-dev-query"


def test_workgroup_enforces_its_configuration_over_the_clients(workgroup: dict[str, Any]) -> None:
    assert workgroup["WorkGroupConfiguration"]["EnforceWorkGroupConfiguration"] is True


def test_workgroup_cuts_a_query_off_at_the_configured_scan_limit(workgroup: dict[str, Any]) -> None:
    cutoff = workgroup["WorkGroupConfiguration"]["BytesScannedCutoffPerQuery"]
    assert cutoff == DEFAULT.query_scan_limit_gb * 1_000_000_000 == 20_000_000_000
    assert cutoff >= 10_000_000  # Athena's smallest allowed cutoff


def test_workgroup_encrypts_its_results(workgroup: dict[str, Any]) -> None:
    results = workgroup["WorkGroupConfiguration"]["ResultConfiguration"]
    assert results["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    assert results["ExpectedBucketOwner"] == {"Ref": "AWS::AccountId"}


def test_workgroup_writes_results_under_the_results_prefix_of_the_records_bucket(
    workgroup: dict[str, Any], bucket_ref: str
) -> None:
    location = render(workgroup["WorkGroupConfiguration"]["ResultConfiguration"]["OutputLocation"])
    assert location == f"s3://{bucket_ref}/{DEFAULT.query_results_prefix}"


def test_workgroup_runs_the_engine_version_athena_chooses(workgroup: dict[str, Any]) -> None:
    assert workgroup["WorkGroupConfiguration"]["EngineVersion"] == {"SelectedEngineVersion": "AUTO"}


def test_query_results_expire(resources: dict[str, Any]) -> None:
    (records,) = (b for b in _of_type(resources, "AWS::S3::Bucket") if "LoggingConfiguration" in b)
    rules = {r["Id"]: r for r in records["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-query-results"]["Prefix"] == DEFAULT.query_results_prefix
    assert rules["expire-query-results"]["ExpirationInDays"] == DEFAULT.query_results_retention_days


def test_only_the_finalizer_touches_query_results_for_its_parquet_copy(resources: dict[str, Any]) -> None:
    """The Parquet copy's UNLOAD runs with the finalizer's role: Athena writes its manifest under the results
    prefix. No other function may touch results."""
    touching = {
        r["Properties"]["Roles"][0]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy"
        and any(DEFAULT.query_results_prefix in g[1] for g in _grants(r["Properties"]["PolicyDocument"]["Statement"]))
    }
    assert len(touching) == 1
    (role,) = touching
    assert role.startswith("FunctionsFinalizerServiceRole")


# -- the query policy ----------------------------------------------------------------------------


def test_query_policy_is_named_for_the_stage(resources: dict[str, Any]) -> None:
    (found,) = _of_type(resources, "AWS::IAM::ManagedPolicy")
    assert found["ManagedPolicyName"] == DEFAULT.query_policy == "sluice-dev-query-output"


def test_query_policy_grants_no_wildcard_action_and_nothing_on_every_resource(policy: list[dict[str, Any]]) -> None:
    for action, resource in _grants(policy):
        assert "*" not in action, action
        assert resource != "*", action


def test_query_policy_has_only_plain_allow_statements(policy: list[dict[str, Any]]) -> None:
    assert {s["Effect"] for s in policy} == {"Allow"}
    assert all("NotAction" not in s and "NotResource" not in s for s in policy)


def test_query_policy_runs_queries_only_in_the_workgroup(policy: list[dict[str, Any]]) -> None:
    athena = {(a, r) for a, r in _grants(policy) if a.startswith("athena:")}
    workgroup = f"arn:<AWS::Partition>:athena:<AWS::Region>:<AWS::AccountId>:workgroup/{DEFAULT.workgroup}"
    assert {r for _, r in athena} == {workgroup}
    assert {a for a, _ in athena} == {
        "athena:StartQueryExecution",
        "athena:StopQueryExecution",
        "athena:GetQueryExecution",
        "athena:BatchGetQueryExecution",
        "athena:ListQueryExecutions",
        "athena:GetQueryResults",
        "athena:GetQueryResultsStream",
        "athena:GetQueryRuntimeStatistics",
        "athena:GetWorkGroup",
    }


def test_query_policy_reads_only_this_database_and_its_tables(policy: list[dict[str, Any]]) -> None:
    glue = {(a, r) for a, r in _grants(policy) if a.startswith("glue:")}
    arn = "arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>"
    database = DEFAULT.glue_database
    assert {r for _, r in glue} == {
        f"{arn}:catalog",
        f"{arn}:database/{database}",
        *(f"{arn}:table/{database}/{table_name(s.name)}" for s in SPECS),
        *(f"{arn}:table/{database}/{table_name(s.name)}_parquet" for s in SPECS),
    }
    assert all(a.split(":")[1].startswith(("Get", "BatchGet")) for a, _ in glue)


def test_query_policy_reads_runs_and_writes_only_query_results(policy: list[dict[str, Any]], bucket_ref: str) -> None:
    objects = {(a, r) for a, r in _grants(policy) if a.startswith("s3:") and r.startswith(f"{bucket_ref}.Arn/")}
    by_prefix: dict[str, set[str]] = {}
    for action, resource in objects:
        by_prefix.setdefault(resource.removeprefix(f"{bucket_ref}.Arn/"), set()).add(action)
    assert by_prefix == {
        "runs/*": {"s3:GetObject"},
        f"{DEFAULT.query_results_prefix}*": {
            "s3:GetObject",
            "s3:PutObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
        },
    }


def test_query_policy_lists_only_runs_and_query_results(policy: list[dict[str, Any]]) -> None:
    (listing,) = (s for s in policy if "s3:ListBucket" in _listed(s["Action"]))
    assert _listed(listing["Action"]) == ["s3:ListBucket"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["runs/*", f"{DEFAULT.query_results_prefix}*"]}}


def test_query_policy_touches_the_records_bucket_itself_only_to_list_and_locate_it(
    policy: list[dict[str, Any]], bucket_ref: str
) -> None:
    on_bucket = {a for a, r in _grants(policy) if r == f"{bucket_ref}.Arn"}
    assert on_bucket == {"s3:ListBucket", "s3:GetBucketLocation"}

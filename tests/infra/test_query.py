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


def _workgroup(resources: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = (w for w in _of_type(resources, "AWS::Athena::WorkGroup") if w["Name"] == name)
    return found


@pytest.fixture(scope="module")
def workgroup(resources: dict[str, Any]) -> dict[str, Any]:
    """The users' workgroup."""
    return _workgroup(resources, DEFAULT.workgroup)


@pytest.fixture(scope="module", params=["query", "parquet-copy"])
def each_workgroup(request: pytest.FixtureRequest, resources: dict[str, Any]) -> dict[str, Any]:
    """The users' workgroup, and the Parquet copy's: both hold the same rules for results."""
    return _workgroup(resources, DEFAULT.name(request.param))


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


def test_the_stack_has_two_workgroups_the_users_and_the_parquet_copys(resources: dict[str, Any]) -> None:
    names = sorted(w["Name"] for w in _of_type(resources, "AWS::Athena::WorkGroup"))
    assert names == sorted([DEFAULT.workgroup, DEFAULT.parquet_workgroup])
    assert names == ["sluice-dev-parquet-copy", "sluice-dev-query"]


def test_workgroup_enforces_its_configuration_over_the_clients(each_workgroup: dict[str, Any]) -> None:
    assert each_workgroup["WorkGroupConfiguration"]["EnforceWorkGroupConfiguration"] is True


def test_workgroup_cuts_a_query_off_at_the_configured_scan_limit(workgroup: dict[str, Any]) -> None:
    cutoff = workgroup["WorkGroupConfiguration"]["BytesScannedCutoffPerQuery"]
    assert cutoff == DEFAULT.query_scan_limit_gb * 1_000_000_000 == 20_000_000_000
    assert cutoff >= 10_000_000  # Athena's smallest allowed cutoff


def test_workgroup_encrypts_its_results(each_workgroup: dict[str, Any]) -> None:
    results = each_workgroup["WorkGroupConfiguration"]["ResultConfiguration"]
    assert results["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    assert results["ExpectedBucketOwner"] == {"Ref": "AWS::AccountId"}


def test_workgroup_writes_results_under_the_results_prefix_of_the_records_bucket(
    workgroup: dict[str, Any], bucket_ref: str
) -> None:
    location = render(workgroup["WorkGroupConfiguration"]["ResultConfiguration"]["OutputLocation"])
    assert location == f"s3://{bucket_ref}/{DEFAULT.query_results_prefix}"


def test_the_parquet_copys_workgroup_writes_its_results_in_a_folder_of_the_query_results(
    resources: dict[str, Any], bucket_ref: str
) -> None:
    """Inside the query results, so their lifecycle expires the copy's manifests too; a folder of its own, so the
    finalizer's grant reaches no user's results."""
    copy = _workgroup(resources, DEFAULT.parquet_workgroup)
    location = render(copy["WorkGroupConfiguration"]["ResultConfiguration"]["OutputLocation"])
    assert location == f"s3://{bucket_ref}/{DEFAULT.query_results_prefix}parquet-copy/"
    assert DEFAULT.parquet_results_prefix.startswith(DEFAULT.query_results_prefix)


def test_workgroup_runs_the_engine_version_athena_chooses(each_workgroup: dict[str, Any]) -> None:
    assert each_workgroup["WorkGroupConfiguration"]["EngineVersion"] == {"SelectedEngineVersion": "AUTO"}


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


def test_the_finalizer_reaches_only_its_copys_results_not_the_users(resources: dict[str, Any]) -> None:
    on_results = {
        resource
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy"
        for _, resource in _grants(r["Properties"]["PolicyDocument"]["Statement"])
        if DEFAULT.query_results_prefix in resource
    }
    assert {r.split(".Arn/", 1)[1] for r in on_results} == {f"{DEFAULT.parquet_results_prefix}*"}


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

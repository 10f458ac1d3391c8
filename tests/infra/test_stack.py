"""The synthesized stack, one property per test."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template
from infra.app import build, context
from infra.config import DEFAULT, FunctionSettings
from infra.crawls import alarm_range_allowed, deployed_specs, missing_run_period_s

from sluice.settings import Settings
from sluice.spec import CrawlSpec

SPECS = deployed_specs()


def of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def _queue(resources: dict[str, Any], name: str) -> dict[str, Any]:
    queues = of_type(resources, "AWS::SQS::Queue").values()
    return next(q["Properties"] for q in queues if q["Properties"]["QueueName"] == name)


def _function(resources: dict[str, Any], name: str) -> dict[str, Any]:
    functions = of_type(resources, "AWS::Lambda::Function").values()
    return next(f["Properties"] for f in functions if f["Properties"]["FunctionName"] == name)


def _statements(resources: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


# -- SQS -----------------------------------------------------------------------------------------


def test_queue_is_encrypted(resources: dict[str, Any]) -> None:
    assert _queue(resources, DEFAULT.queue_name)["SqsManagedSseEnabled"] is True


def test_queue_visibility_is_six_times_the_fetcher_timeout(resources: dict[str, Any]) -> None:
    assert _queue(resources, DEFAULT.queue_name)["VisibilityTimeout"] >= 6 * DEFAULT.fetcher.timeout_s


def test_queue_long_polls(resources: dict[str, Any]) -> None:
    assert _queue(resources, DEFAULT.queue_name)["ReceiveMessageWaitTimeSeconds"] == 20


def test_queue_is_fifo_with_a_group_per_host_in_high_throughput_mode(resources: dict[str, Any]) -> None:
    """One fetcher at a time holds a host's group: the per-host limits' fleet-wide guarantee."""
    queue = _queue(resources, DEFAULT.queue_name)
    assert (queue["FifoQueue"], queue["ContentBasedDeduplication"]) == (True, False)
    assert (queue["DeduplicationScope"], queue["FifoThroughputLimit"]) == ("messageGroup", "perMessageGroupId")
    assert _queue(resources, DEFAULT.dlq_name)["FifoQueue"] is True  # a FIFO queue's dead letters go to a FIFO queue


def test_queue_redrives_to_the_dead_letter_queue(resources: dict[str, Any]) -> None:
    policy = _queue(resources, DEFAULT.queue_name)["RedrivePolicy"]
    assert policy["maxReceiveCount"] == DEFAULT.max_receive_count
    assert "DeadLetters" in json.dumps(policy["deadLetterTargetArn"])


def test_dead_letter_queue_keeps_messages_fourteen_days(resources: dict[str, Any]) -> None:
    assert _queue(resources, DEFAULT.dlq_name)["MessageRetentionPeriod"] == 14 * 86400


def test_queues_refuse_plain_http(resources: dict[str, Any]) -> None:
    policies = [p["Properties"]["PolicyDocument"] for p in of_type(resources, "AWS::SQS::QueuePolicy").values()]
    assert len(policies) == 4  # the frontier, the finalize shards' queue, and their dead-letter queues
    for policy in policies:
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in policy["Statement"]
        )


# -- Lambda --------------------------------------------------------------------------------------


@pytest.mark.parametrize("settings", [DEFAULT.scheduler, DEFAULT.fetcher, DEFAULT.finalizer], ids=lambda s: s.handler)
def test_function_runs_its_handler_with_configured_memory_and_timeout(
    resources: dict[str, Any], settings: FunctionSettings
) -> None:
    name = DEFAULT.name(settings.handler.split(".")[-2])
    function = _function(resources, name)
    assert function["Handler"] == settings.handler
    assert function["MemorySize"] == settings.memory_mb
    assert function["Timeout"] == settings.timeout_s
    assert function.get("ReservedConcurrentExecutions") == settings.reserved_concurrency


def test_functions_use_a_current_python_on_arm64(resources: dict[str, Any]) -> None:
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["Runtime"] == DEFAULT.runtime
        assert function["Properties"]["Architectures"] == ["arm64"]


def test_functions_share_the_dependency_layer(resources: dict[str, Any]) -> None:
    layers = list(of_type(resources, "AWS::Lambda::LayerVersion"))
    assert len(layers) == 1
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["Layers"] == [{"Ref": layers[0]}]


def test_functions_are_traced(resources: dict[str, Any]) -> None:
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}


def test_function_logs_are_json_and_kept_thirty_days(resources: dict[str, Any]) -> None:
    groups = of_type(resources, "AWS::Logs::LogGroup").values()
    assert sorted(g["Properties"]["LogGroupName"] for g in groups) == sorted(
        f"/aws/lambda/{DEFAULT.name(n)}" for n in ("scheduler", "fetcher", "finalizer")
    )
    assert {g["Properties"]["RetentionInDays"] for g in groups} == {DEFAULT.log_retention_days}
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["LoggingConfig"]["LogFormat"] == "JSON"


def test_function_environment_is_exactly_what_settings_validates(resources: dict[str, Any]) -> None:
    env = _function(resources, DEFAULT.name("fetcher"))["Environment"]["Variables"]
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Sluice"
    assert "SLUICE_ALLOW_LOOPBACK" not in env or env["SLUICE_ALLOW_LOOPBACK"] == "false"
    concrete = {k: (v if isinstance(v, str) else "https://resolved.example/x") for k, v in env.items()}
    settings = Settings.from_env(concrete)
    assert str(settings.specs_dir) == "/var/task/crawls"
    assert settings.allow_loopback is False


def _mapping(resources: dict[str, Any], function: str) -> dict[str, Any]:
    mapping: dict[str, Any]
    (mapping,) = (
        m["Properties"]
        for m in of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"]["Ref"].startswith(f"Functions{function}")
    )
    return mapping


def test_fetcher_event_source_reports_partial_failures_with_a_fleet_cap(resources: dict[str, Any]) -> None:
    mapping = _mapping(resources, "Fetcher")
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == DEFAULT.batch_size
    assert "MaximumBatchingWindowInSeconds" not in mapping  # a FIFO source takes none
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": DEFAULT.fetcher_max_concurrency}


def test_finalize_shard_tasks_reach_the_finalizer_one_at_a_time_with_a_cap(resources: dict[str, Any]) -> None:
    mapping = _mapping(resources, "Finalizer")
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 1  # a task is a shard's whole work
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": DEFAULT.finalizer_shard_max_concurrency}
    # Lambda throttles a source past the function's reserved concurrency: room above the cap for the sweep.
    assert DEFAULT.finalizer.reserved_concurrency is not None
    assert DEFAULT.finalizer.reserved_concurrency > DEFAULT.finalizer_shard_max_concurrency
    queue = _queue(resources, DEFAULT.finalize_queue_name)
    assert queue["VisibilityTimeout"] == DEFAULT.finalizer.timeout_s * DEFAULT.visibility_timeout_factor
    assert queue["RedrivePolicy"]["maxReceiveCount"] == DEFAULT.max_receive_count


# -- DynamoDB and S3 -----------------------------------------------------------------------------


def test_tables_are_on_demand_encrypted_and_recoverable(resources: dict[str, Any]) -> None:
    tables = [t["Properties"] for t in of_type(resources, "AWS::DynamoDB::Table").values()]
    assert sorted(t["TableName"] for t in tables) == sorted([DEFAULT.ledger_table, DEFAULT.records_table])
    for table in tables:
        assert table["BillingMode"] == "PAY_PER_REQUEST"
        assert table["SSESpecification"] == {"SSEEnabled": True}
        assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_ledger_expires_url_entries(resources: dict[str, Any]) -> None:
    tables = {
        t["Properties"]["TableName"]: t["Properties"] for t in of_type(resources, "AWS::DynamoDB::Table").values()
    }
    assert tables[DEFAULT.ledger_table]["TimeToLiveSpecification"] == {"AttributeName": "t", "Enabled": True}
    assert "TimeToLiveSpecification" not in tables[DEFAULT.records_table]


def test_buckets_are_encrypted_and_private(resources: dict[str, Any]) -> None:
    for bucket in of_type(resources, "AWS::S3::Bucket").values():
        props = bucket["Properties"]
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }


def test_buckets_refuse_plain_http(resources: dict[str, Any]) -> None:
    policies = [p["Properties"]["PolicyDocument"] for p in of_type(resources, "AWS::S3::BucketPolicy").values()]
    assert len(policies) == 2
    for policy in policies:
        assert any(s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s) for s in policy["Statement"])


def test_records_bucket_logs_access(resources: dict[str, Any]) -> None:
    logged = [b for b in of_type(resources, "AWS::S3::Bucket").values() if "LoggingConfiguration" in b["Properties"]]
    assert len(logged) == 1
    assert logged[0]["Properties"]["LoggingConfiguration"]["LogFilePrefix"] == "records/"


def test_records_bucket_has_lifecycle_rules_per_prefix(resources: dict[str, Any]) -> None:
    (records,) = (
        b for b in of_type(resources, "AWS::S3::Bucket").values() if "LoggingConfiguration" in b["Properties"]
    )
    rules = {r["Id"]: r for r in records["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-work"]["Prefix"] == "work/"
    assert rules["expire-work"]["ExpirationInDays"] == DEFAULT.work_retention_days
    assert "ExpirationInDays" not in rules["age-run-outputs"]  # a run's output is the next run's reused records
    assert rules["age-run-outputs"]["Prefix"] == "runs/"
    assert [t["StorageClass"] for t in rules["age-run-outputs"]["Transitions"]] == ["STANDARD_IA", "GLACIER_IR"]
    # The raw archive ages with the outputs it can rebuild, and is kept as long.
    assert rules["age-archive"]["Prefix"] == "archive/"
    assert "ExpirationInDays" not in rules["age-archive"]
    assert rules["age-archive"]["Transitions"] == rules["age-run-outputs"]["Transitions"]


# -- EventBridge ---------------------------------------------------------------------------------


def test_each_scheduled_spec_gets_a_rule_naming_its_crawl_and_event(resources: dict[str, Any]) -> None:
    rules = [r["Properties"] for r in of_type(resources, "AWS::Events::Rule").values()]
    scheduled = {}
    for rule in rules:
        target = rule["Targets"][0]
        if "InputTransformer" in target:
            transformer = target["InputTransformer"]
            assert transformer["InputPathsMap"] == {"id": "$.id"}  # a retried start carries its event id
            crawl = json.loads(transformer["InputTemplate"].replace("<id>", '"x"'))["crawl"]
            scheduled[crawl] = rule["ScheduleExpression"]
    assert scheduled == {s.name: s.schedule for s in SPECS if s.schedule}


def test_a_sweep_finalizes_overdue_runs(resources: dict[str, Any]) -> None:
    rules = [r["Properties"] for r in of_type(resources, "AWS::Events::Rule").values()]
    sweeps = [r for r in rules if r["ScheduleExpression"] == f"rate({DEFAULT.sweep_minutes} minutes)"]
    assert len(sweeps) == 1
    assert "Input" not in sweeps[0]["Targets"][0]


# -- CloudWatch and SNS --------------------------------------------------------------------------


def _alarms(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"] for a in of_type(resources, "AWS::CloudWatch::Alarm").values()
    }


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_record_count_alarm_uses_the_spec_floor(resources: dict[str, Any], spec: CrawlSpec) -> None:
    alarm = _alarms(resources)[DEFAULT.name(f"{spec.name}-record-count-drop")]
    assert alarm["Threshold"] == spec.alerts.record_count_floor
    assert alarm["ComparisonOperator"] == "LessThanThreshold"


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_error_rate_alarm_uses_the_spec_ceiling(resources: dict[str, Any], spec: CrawlSpec) -> None:
    alarm = _alarms(resources)[DEFAULT.name(f"{spec.name}-error-rate")]
    assert alarm["Threshold"] == spec.alerts.max_error_rate
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


@pytest.mark.parametrize("spec", [s for s in SPECS if s.schedule], ids=lambda s: s.name)
def test_missing_run_alarm_breaches_on_silence(resources: dict[str, Any], spec: CrawlSpec) -> None:
    alarm = _alarms(resources)[DEFAULT.name(f"{spec.name}-missing-run")]
    assert alarm["TreatMissingData"] == "breaching"  # no datum: the sweep stopped, which is silence too
    assert (alarm["MetricName"], alarm["Statistic"]) == ("RunMissing", "Maximum")
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    # One hour, one period, whatever the schedule: the sweep judges the schedule, so a monthly crawl
    # needs no window CloudWatch cannot hold (7 days at most; 1 day under an hour's period).
    assert (alarm["Period"], alarm["EvaluationPeriods"]) == (3600, 1)


@pytest.mark.parametrize("sweep_minutes", [1, 15, 30, 31, 90, 24 * 60])
def test_the_missing_run_alarm_holds_two_sweeps_within_cloudwatchs_limits(sweep_minutes: int) -> None:
    period = missing_run_period_s(sweep_minutes)
    assert period >= 2 * sweep_minutes * 60
    assert period % 3600 == 0
    assert alarm_range_allowed(period, 1)


@pytest.mark.parametrize(
    ("period_s", "evaluations", "allowed"),
    [(300, 288, True), (300, 289, False), (3600, 168, True), (3600, 169, False), (86400, 8, False), (90, 1, False)],
)
def test_cloudwatchs_alarm_range_limits(period_s: int, evaluations: int, allowed: bool) -> None:
    assert alarm_range_allowed(period_s, evaluations) is allowed


def test_dead_letters_alarm_fires_on_the_first_message(resources: dict[str, Any]) -> None:
    alarm = _alarms(resources)[DEFAULT.name("dead-letters")]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_fetcher_errors_and_throttles_are_alarmed(resources: dict[str, Any]) -> None:
    alarms = _alarms(resources)
    assert alarms[DEFAULT.name("fetcher-errors")]["MetricName"] == "Errors"
    assert alarms[DEFAULT.name("fetcher-throttles")]["MetricName"] == "Throttles"


def test_every_alarm_pages_through_the_topic(resources: dict[str, Any]) -> None:
    (topic,) = of_type(resources, "AWS::SNS::Topic")
    for name, alarm in _alarms(resources).items():
        assert alarm["AlarmActions"] == [{"Ref": topic}], name


def test_alarm_topic_is_encrypted_with_a_rotated_key(resources: dict[str, Any]) -> None:
    (topic,) = of_type(resources, "AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]
    (key,) = of_type(resources, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True


def test_alarm_email_from_context_is_subscribed(template: Template) -> None:
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})


def test_dashboard_shows_run_metrics_per_crawl(resources: dict[str, Any]) -> None:
    (dashboard,) = of_type(resources, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for spec in SPECS:
        assert f"{spec.name}: records per run" in body


# -- IAM -----------------------------------------------------------------------------------------


def test_no_statement_grants_every_action(resources: dict[str, Any]) -> None:
    for statement in _statements(resources):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert "*" not in actions, statement
        assert not any(a.endswith(":*") for a in actions), statement


def test_only_xray_is_granted_on_every_resource(resources: dict[str, Any]) -> None:
    on_star = [s for s in _statements(resources) if s["Resource"] == "*"]
    assert on_star
    for statement in on_star:
        assert set(statement["Action"]) == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def _resources(statement: dict[str, Any]) -> list[Any]:
    """A statement's resources as a list: @aws-cdk/aws-iam:minimizePolicies merges statements that share actions."""
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def _s3_grants(resources: dict[str, Any], function: str) -> dict[str, set[str]]:
    """A function's S3 grants: each object prefix (or "list:PREFIX") to its actions."""
    grants: dict[str, set[str]] = {}
    for logical, policy in of_type(resources, "AWS::IAM::Policy").items():
        if not logical.startswith(f"Functions{function}"):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            s3 = {a for a in actions if a.startswith("s3:")}
            if not s3:
                continue
            if s3 == {"s3:ListBucket"}:
                prefixes = statement["Condition"]["StringLike"]["s3:prefix"]
                for prefix in prefixes:
                    grants.setdefault(f"list:{prefix}", set()).update(s3)
                continue
            for resource in map(json.dumps, _resources(statement)):
                prefixes = (
                    "work/*/finalize/",
                    "work/",
                    "runs/",
                    "seeds/",
                    "archive/",
                    DEFAULT.parquet_results_prefix,
                    DEFAULT.query_results_prefix,
                )
                prefix = next((p for p in prefixes if f"/{p}*" in resource), "bucket")
                grants.setdefault(prefix, set()).update(s3)
    return grants


def test_each_function_gets_exactly_the_object_actions_its_step_uses(resources: dict[str, Any]) -> None:
    assert _s3_grants(resources, "Scheduler") == {
        # the seed set; sitemap seeds written once, read by continuations; shared robots.txt
        "work/": {"s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"},
        "list:work/*": {"s3:ListBucket"},
        "runs/": {"s3:GetObject"},  # the catalog run's page index
        "list:runs/*": {"s3:ListBucket"},
        "seeds/": {"s3:GetObject"},  # seed files (seeds.file), streamed in ranges
        "list:seeds/*": {"s3:ListBucket"},
    }
    assert _s3_grants(resources, "Fetcher") == {
        "work/": {"s3:PutObject", "s3:GetObject"},  # parts written, the seed set and shared robots.txt read
        "list:work/*": {"s3:ListBucket"},
    }  # no deployed spec sets output.archive (demo-books, which does, is local only): no archive/ grant
    assert _s3_grants(resources, "Finalizer") == {
        "work/": {"s3:GetObject"},
        "work/*/finalize/": {"s3:PutObject"},  # finalize shard results, under each run's finalize/ folder
        "runs/": {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"},
        "list:work/*": {"s3:ListBucket"},
        "list:runs/*": {"s3:ListBucket"},
        # The Parquet copy's UNLOAD, run with the finalizer's role: its files go to runs/*/parquet/ (granted
        # above, with the output), its manifest and metadata to the copy workgroup's results (not the users').
        DEFAULT.parquet_results_prefix: {
            "s3:GetObject",
            "s3:PutObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
        },
        f"list:{DEFAULT.parquet_results_prefix}*": {"s3:ListBucket"},
        "bucket": {"s3:GetBucketLocation"},
    }


def test_each_function_invokes_only_the_functions_its_step_triggers(resources: dict[str, Any]) -> None:
    invokes: dict[str, set[str]] = {}
    for logical, policy in of_type(resources, "AWS::IAM::Policy").items():
        function = next((f for f in ("Scheduler", "Fetcher", "Finalizer") if logical.startswith(f"Functions{f}")), None)
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if function and statement["Action"] == "lambda:InvokeFunction":
                for resource in map(json.dumps, _resources(statement)):
                    target = resource.rsplit(":function:", 1)[1].split('"')[0]
                    invokes.setdefault(function, set()).add(target)
    assert invokes == {
        "Scheduler": {DEFAULT.scheduler_function, DEFAULT.finalizer_function},  # continuations; a fan-out outrun
        "Fetcher": {DEFAULT.finalizer_function},
    }


def test_no_function_writes_the_records_table_unless_a_spec_asks_for_it(resources: dict[str, Any]) -> None:
    table = next(k for k, v in of_type(resources, "AWS::DynamoDB::Table").items() if "Records" in k)
    granted = [json.dumps(s) for s in _statements(resources) if table in json.dumps(s.get("Resource"))]
    assert granted == []  # no shipped spec sets output.records_table


def test_a_stack_without_an_alarm_email_warns_that_nobody_is_paged() -> None:
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": []})
    stack = build(app)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("nobody is paged"))
    assert len(warnings) == 1
    assert not Template.from_stack(stack).find_resources("AWS::SNS::Subscription")


def test_an_alarm_email_that_is_not_one_is_refused() -> None:
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall at example"})
    with pytest.raises(ValueError, match="'oncall at example' is not an email address"):
        build(app)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_failed_parquet_copy_pages_through_each_crawls_alarm(resources: dict[str, Any], spec: CrawlSpec) -> None:
    alarm = _alarms(resources)[DEFAULT.name(f"{spec.name}-parquet-failed")]
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Threshold"]) == ("ParquetFailed", "Maximum", 0)
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"  # no datum: no copy failed

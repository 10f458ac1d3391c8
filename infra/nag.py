"""cdk-nag AwsSolutions findings we accept, each acknowledged where it arises with the reason a reviewer would want."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations

from infra.stack import SluiceStack

_RULE = "AwsSolutions::AwsSolutions-"


def acknowledge(stack: SluiceStack) -> None:
    """Acknowledge the findings that are deliberate in this design, and only those, on the narrowest scope."""
    functions = stack.functions
    bucket = stack.get_logical_id(stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    for function in (functions.scheduler, functions.fetcher, functions.finalizer):
        Validations.of(function).acknowledge(
            Acknowledgment(
                id=f"{_RULE}L1",
                reason="python3.13, not the newest runtime: the layer is byte-compiled and import-tested with a "
                "local interpreter of the runtime's exact version, and these machines have 3.13 (supported by "
                "Lambda into 2029). Moving is one line in infra/config.py once 3.14 is available to CI.",
            ),
            Acknowledgment(
                id=f"{_RULE}IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                reason="The AWS-managed basic execution policy only allows writing the function's CloudWatch logs.",
            ),
            Acknowledgment(
                id=f"{_RULE}IAM5[Resource::*]",
                reason="X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; "
                "these are the only actions granted on '*' (the tests assert no other).",
            ),
        )
    for function in (functions.scheduler, functions.fetcher, functions.finalizer):
        Validations.of(function).acknowledge(
            Acknowledgment(
                id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/work/*]",
                reason="Parts and seed sets are keyed per crawl, run and batch, created at run time: the work/ prefix "
                "is the narrowest resource, and only the object actions each function uses are granted on it.",
            )
        )
    for function in (functions.scheduler, functions.finalizer):
        Validations.of(function).acknowledge(
            Acknowledgment(
                id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/runs/*]",
                reason="Run outputs are keyed per crawl and run, created at run time: runs/ is the narrowest resource; "
                "the scheduler reads the catalog run's page index, the finalizer reads and writes outputs.",
            )
        )
    Validations.of(functions.finalizer).acknowledge(
        Acknowledgment(
            id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/work/*/finalize/*]",
            reason="Finalize shard results are keyed per crawl, run, attempt and shard, created at run time: only "
            "PutObject is granted, and only under a run's finalize/ folder of work/.",
        )
    )
    Validations.of(functions.finalizer).acknowledge(
        Acknowledgment(
            id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/{stack.query.copy_results_prefix}*]",
            reason="The run's Parquet copy is an Athena UNLOAD run with the finalizer's role: Athena writes its "
            "manifest and metadata under a key it names per query execution, in the copy workgroup's results "
            "prefix (its own folder of the query results: nothing but the copy's results, expired by lifecycle).",
        )
    )
    Validations.of(functions.scheduler).acknowledge(
        Acknowledgment(
            id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/seeds/*]",
            reason="Seed files are uploaded per crawl under seeds/NAME/ by the operator: the scheduler only reads "
            "(GetObject) under seeds/, which holds nothing else.",
        )
    )
    if stack.egress is not None:
        for function in functions.in_vpc:
            Validations.of(function).acknowledge(
                Acknowledgment(
                    id=f"{_RULE}IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]",
                    reason="With egress: fixed the function runs in the egress VPC: the AWS-managed VPC access "
                    "policy only lets Lambda create, describe and delete the function's network interfaces "
                    "(and write its logs).",
                )
            )
    policy = stack.query.policy
    Validations.of(policy).acknowledge(
        Acknowledgment(
            id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/runs/*]",
            reason="Querying reads a run's records under runs/crawl=NAME/run=ID/records/, keyed by runs created at "
            "run time: runs/ is the narrowest resource, and only GetObject is granted on it.",
        ),
        Acknowledgment(
            id=f"{_RULE}IAM5[Resource::<{bucket}.Arn>/{stack.query.results_prefix}*]",
            reason="Athena writes each query's results under a key it names per query execution: the workgroup's "
            "results prefix is the narrowest resource, and it holds nothing but results (expired by lifecycle).",
        ),
    )

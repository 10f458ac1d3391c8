"""The three functions, their shared code asset and dependency layer, the fetcher's event source, the schedules."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import ArnFormat, AssetHashType, Duration, Fn, Stack, Tags
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import bundling
from infra.config import CRAWL_TAG, FunctionSettings, StackConfig
from infra.egress import FixedEgress
from infra.queues import Queues
from infra.storage import Storage
from sluice.domain.layout import ARCHIVE_PREFIX, RUNS_PREFIX, SEEDS_PREFIX, WORK_PREFIX
from sluice.domain.secrets import is_ssm, ssm_parameter
from sluice.metrics import NAMESPACE
from sluice.settings import ENV_PREFIX, Settings
from sluice.spec import CrawlSpec
from sluice.spec.columns import table_name, type_table_name

SPECS_DIR = "/var/task/crawls"


class Functions(Construct):
    """Scheduler, fetcher and finalizer: one code asset, one layer, least-privilege grants."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StackConfig,
        storage: Storage,
        queues: Queues,
        specs: list[CrawlSpec],
        egress: FixedEgress | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        python_version = config.runtime.removeprefix("python")
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(
                str(bundling.ROOT / "layers" / "dependencies"),
                asset_hash=bundling.layer_hash(config.architecture, python_version),
                asset_hash_type=AssetHashType.CUSTOM,
                bundling=bundling.options(bundling.LayerBundler(config.architecture, python_version)),
            ),
            compatible_runtimes=[_runtime(config)],
            compatible_architectures=[_architecture(config)],
            description="Sluice runtime dependencies (requirements.txt), built locally with pip --platform",
        )
        self.code = lambda_.Code.from_asset(
            str(bundling.ROOT / "functions"),
            asset_hash=bundling.code_hash(),
            asset_hash_type=AssetHashType.CUSTOM,
            bundling=bundling.options(bundling.CodeBundler(python_version)),
        )
        # Built unvalidated: at synth time names are CloudFormation tokens. The functions
        # validate the real values at cold start (Settings.from_env).
        settings = Settings.model_construct(
            ledger_table=storage.ledger.table_name,
            records_table=storage.records.table_name if any(s.output.records_table for s in specs) else "",
            bucket=storage.bucket.bucket_name,
            queue_url=queues.frontier.queue_url,
            finalize_queue_url=queues.finalize_shards.queue_url,
            specs_dir=Path(SPECS_DIR),
            **config.function_settings(),
        )
        environment = {**settings.to_env(), "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE, "POWERTOOLS_LOG_LEVEL": "INFO"}
        if egress is not None:
            environment[f"{ENV_PREFIX}EGRESS_IPS"] = Fn.join(",", egress.public_ips)
        # With fixed egress, every function that sends the crawl's requests leaves from its addresses: the
        # fetcher, and the scheduler when a spec reads sitemaps. The finalizer sends none and stays out.
        fetches_sitemaps = any(s.seeds.sitemaps is not None for s in specs)
        self.scheduler = self._function(
            "Scheduler",
            config,
            config.scheduler,
            config.scheduler_function,
            environment,
            egress if fetches_sitemaps else None,
        )
        self.fetcher = self._function("Fetcher", config, config.fetcher, config.name("fetcher"), environment, egress)
        self.finalizer = self._function("Finalizer", config, config.finalizer, config.finalizer_function, environment)
        self.in_vpc = [] if egress is None else [self.fetcher, *([self.scheduler] if fetches_sitemaps else [])]
        """The functions whose requests leave from the fixed egress addresses (none without ``egress: fixed``)."""

        # Least privilege, through grants: each function gets what its step touches. Every function
        # that reads objects may list the prefixes it reads, so a missing key is 404, not 403.
        storage.ledger.grant_read_write_data(self.scheduler)  # the run and lock; the catalog run's URLs
        queues.frontier.grant_send_messages(self.scheduler)
        _grant_invoke_by_name(self.scheduler, stack, config.scheduler_function)  # fan-out continuations
        _grant_invoke_by_name(self.scheduler, stack, config.finalizer_function)  # a fan-out the fetchers outran
        queues.finalize_shards.grant_send_messages(self.scheduler)  # a start that closes a stale or stopped run
        # The seed set written; a run's sitemap seeds (seeds.sitemaps) written once, read by its continuations;
        # robots.txt shared with the run's fetchers.
        _grant_objects(
            self.scheduler,
            storage,
            WORK_PREFIX,
            ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
            list_prefix=True,
        )
        _grant_objects(self.scheduler, storage, RUNS_PREFIX, ["s3:GetObject"], list_prefix=True)  # catalog index
        _grant_objects(self.scheduler, storage, SEEDS_PREFIX, ["s3:GetObject"], list_prefix=True)  # seed files

        storage.ledger.grant_read_write_data(self.fetcher)  # URL entries, progress shards, the run (read)
        queues.frontier.grant_send_messages(self.fetcher)  # discovered links
        # Receive, delete and visibility on the frontier come with its event source (below): packing
        # receives and deletes messages with them too (sluice.pipeline.visit.batch).
        _grant_invoke_by_name(self.fetcher, stack, config.finalizer_function)
        # One part of records per batch written, the run's seed set read.
        _grant_objects(self.fetcher, storage, WORK_PREFIX, ["s3:PutObject", "s3:GetObject"], list_prefix=True)
        if any(s.output.records_table for s in specs):
            storage.records.grant_write_data(self.fetcher)
        if any(s.output.archive for s in specs):
            # Each batch's responses, written once; never read by a function (`sluice reextract` reads them
            # with the operator's credentials).
            _grant_objects(self.fetcher, storage, ARCHIVE_PREFIX, ["s3:PutObject"])
        _grant_secrets(self.fetcher, stack, specs)  # it sends the pages' requests
        # The scheduler sends requests too, for the specs that read sitemaps (with their request section).
        _grant_secrets(self.scheduler, stack, [s for s in specs if s.seeds.sitemaps is not None])

        storage.ledger.grant_read_write_data(self.finalizer)  # URLs, the run, each phase's completion set
        # Reads this run's parts and the catalog run's output; writes this run's output, and its shard
        # tasks' results under the run's work prefix (finalize/).
        _grant_objects(self.finalizer, storage, WORK_PREFIX, ["s3:GetObject"], list_prefix=True)
        _grant_objects(self.finalizer, storage, f"{WORK_PREFIX}*/finalize/", ["s3:PutObject"])
        queues.finalize_shards.grant_send_messages(self.finalizer)  # each phase's shard tasks
        _grant_objects(
            self.finalizer,
            storage,
            RUNS_PREFIX,
            ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
            list_prefix=True,
        )

        _grant_parquet_copy(self.finalizer, stack, config, storage, specs)

        self.fetcher.add_event_source(
            sources.SqsEventSource(
                queues.frontier,
                batch_size=config.batch_size,  # a FIFO event source takes no batching window
                report_batch_item_failures=True,
                # At most this many fetchers at once (Lambda scales a FIFO source to its busy groups, hosts).
                max_concurrency=config.fetcher_max_concurrency,
            )
        )
        # Finalize shard tasks: one a batch (a task is a shard's whole work), at most so many at once. The
        # function's reserved concurrency leaves room above it for the sweep and the fetchers' triggers.
        self.finalizer.add_event_source(
            sources.SqsEventSource(
                queues.finalize_shards,
                batch_size=1,
                report_batch_item_failures=True,
                max_concurrency=config.finalizer_shard_max_concurrency,
            )
        )
        self.schedules = [self._schedule(spec, config) for spec in specs if spec.schedule]
        self.sweep = events.Rule(
            self,
            "Sweep",
            description="Finalize runs that are done or past their deadline (a safety net behind the fetchers)",
            schedule=events.Schedule.rate(Duration.minutes(config.sweep_minutes)),
            targets=[targets.LambdaFunction(self.finalizer, retry_attempts=2)],
        )

    def _function(
        self,
        id: str,
        config: StackConfig,
        settings: FunctionSettings,
        name: str,
        environment: dict[str, str],
        egress: FixedEgress | None = None,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            self,
            f"{id}Logs",
            log_group_name=f"/aws/lambda/{name}",
            retention=_retention(config.log_retention_days),
        )
        return lambda_.Function(
            self,
            id,
            function_name=name,
            runtime=_runtime(config),
            architecture=_architecture(config),
            handler=settings.handler,
            code=self.code,
            layers=[self.layer],
            memory_size=settings.memory_mb,
            timeout=Duration.seconds(settings.timeout_s),
            reserved_concurrent_executions=settings.reserved_concurrency,
            environment=environment,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            description=f"Sluice {id.lower()} ({settings.handler})",
            vpc=egress.vpc if egress is not None else None,
            vpc_subnets=egress.subnets if egress is not None else None,
            security_groups=[egress.security_group] if egress is not None else None,
        )

    def _schedule(self, spec: CrawlSpec, config: StackConfig) -> events.Rule:
        rule = events.Rule(
            self,
            f"Schedule-{spec.name}",
            rule_name=config.name(f"schedule-{spec.name}")[:64],
            description=f"Starts a run of crawl {spec.name}",
            schedule=events.Schedule.expression(spec.schedule or ""),
            targets=[
                targets.LambdaFunction(
                    self.scheduler,
                    # The event id: a retried start carries the same one and resumes its own run.
                    event=events.RuleTargetInput.from_object(
                        {"crawl": spec.name, "trigger": events.EventField.event_id}
                    ),
                    retry_attempts=2,
                )
            ],
        )
        Tags.of(rule).add(CRAWL_TAG, spec.name)
        return rule


def _grant_objects(
    grantee: lambda_.Function, storage: Storage, prefix: str, actions: list[str], *, list_prefix: bool = False
) -> None:
    """Exactly these object actions under one prefix of the records bucket (and listing that prefix)."""
    grantee.add_to_role_policy(
        iam.PolicyStatement(actions=actions, resources=[storage.bucket.arn_for_objects(f"{prefix}*")])
    )
    if list_prefix:
        grantee.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[storage.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )


def _grant_parquet_copy(
    grantee: lambda_.Function, stack: Stack, config: StackConfig, storage: Storage, specs: list[CrawlSpec]
) -> None:
    """What the Parquet copy's UNLOAD takes (sluice.pipeline.finalize.columnar): Athena runs it as the finalizer.

    Starting and reading queries in the copy's own workgroup only (its scan cut-off sized to a whole run; never
    the users' query workgroup, whose 20 GB would cancel a large run's copy); reading the definitions of the
    JSON tables it selects from (and their database and catalog); writing that workgroup's results (UNLOAD's
    manifest and metadata) under its results prefix. The copy's files go to ``runs/*/parquet/``, which the
    finalizer's grant on ``runs/`` (its output) already covers: the copy adds no S3 write beside its results.
    """
    workgroup = stack.format_arn(service="athena", resource="workgroup", resource_name=config.parquet_workgroup)
    grantee.add_to_role_policy(
        iam.PolicyStatement(actions=["athena:StartQueryExecution", "athena:GetQueryExecution"], resources=[workgroup])
    )
    database = config.glue_database
    tables = [t for spec in specs for t in json_table_names(spec)]
    grantee.add_to_role_policy(
        iam.PolicyStatement(
            actions=["glue:GetDatabase", "glue:GetTable", "glue:GetPartitions"],
            resources=[
                stack.format_arn(service="glue", resource="catalog"),
                stack.format_arn(service="glue", resource="database", resource_name=database),
                *(
                    stack.format_arn(
                        service="glue",
                        resource="table",
                        resource_name=f"{database}/{table}",
                        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                    )
                    for table in tables
                ),
            ],
        )
    )
    results = config.parquet_results_prefix
    _grant_objects(
        grantee,
        storage,
        results,
        ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
        list_prefix=True,
    )
    grantee.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[storage.bucket.bucket_arn])
    )


def json_table_names(spec: CrawlSpec) -> list[str]:
    """The crawl's tables over its JSON Lines: its own, and one per page type."""
    return [table_name(spec.name), *(type_table_name(spec.name, kind) for kind in spec.types or {})]


def _grant_secrets(grantee: lambda_.Function, stack: Stack, specs: list[CrawlSpec]) -> None:
    """Read exactly the secrets the specs name (by name, in the stack's account and region), and none if none.

    A Secrets Manager secret's ARN ends in ``-`` and six random characters, so its name is matched
    with ``NAME-??????`` (exactly six, as AWS documents). No kms:Decrypt: Secrets Manager and SSM
    decrypt with their AWS managed keys on the caller's behalf; a customer managed key's own policy
    must let the fetcher's role use it (docs/operations.md).
    """
    names = sorted({name for spec in specs for name in spec.request.secret_names()})
    secrets = [
        stack.format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{name}-??????",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for name in names
        if not is_ssm(name)
    ]
    parameters = [
        stack.format_arn(
            service="ssm",
            resource="parameter",
            resource_name=ssm_parameter(name).lstrip("/"),
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        for name in names
        if is_ssm(name)
    ]
    if secrets:
        grantee.add_to_role_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=secrets))
    if parameters:
        grantee.add_to_role_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=parameters))


def _grant_invoke_by_name(grantee: lambda_.Function, stack: Stack, function_name: str) -> None:
    """lambda:InvokeFunction on one function named in the config (by name: no dependency cycle)."""
    arn = stack.format_arn(
        service="lambda", resource="function", resource_name=function_name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
    grantee.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[arn]))


def _runtime(config: StackConfig) -> lambda_.Runtime:
    return lambda_.Runtime(config.runtime, lambda_.RuntimeFamily.PYTHON, supports_inline_code=True)


def _architecture(config: StackConfig) -> lambda_.Architecture:
    return lambda_.Architecture.ARM_64 if config.architecture == "arm64" else lambda_.Architecture.X86_64


def _retention(days: int) -> logs.RetentionDays:
    return {30: logs.RetentionDays.ONE_MONTH, 90: logs.RetentionDays.THREE_MONTHS, 14: logs.RetentionDays.TWO_WEEKS}[
        days
    ]

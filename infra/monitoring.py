"""Alarms that page someone, and a dashboard: per crawl, the three questions a scheduled crawl must answer.

Did it run (the sweep's RunMissing: no run finished within the schedule period plus grace; silence breaches)?
Did it collect a plausible number of records (RecordCountRatio against the spec's floor)?
Did errors rise (ErrorRate against the spec's ceiling)? Plus the pipeline's own health:
dead letters, fetcher errors and throttles.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import CRAWL_TAG, StackConfig
from infra.crawls import missing_run_period_s
from infra.functions import Functions
from infra.queues import Queues
from sluice.metrics import CRAWL_DIMENSION, NAMESPACE, UNITS, RunMetric
from sluice.spec import CrawlSpec

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

RUN_PERIOD = Duration.hours(1)

HOST_BLOCKED_LOG = "host blocked for the run"
"""The fetcher's log line when the breaker pauses a host (``sluice.pipeline.visit.batch``): host and reason."""
# Its reason reads "host H blocked: refusals (403/429) on 12 of 20 answers (60%)" (fetch.politeness):
# the refusal, the counts and the share are parsed out of it for the per-host table.
_BLOCKED_HOSTS_QUERY = [
    "fields @timestamp, crawl, run_id, host",
    f'filter message = "{HOST_BLOCKED_LOG}"',
    r"parse reason /blocked: (?<refusal>.+) on (?<refused>\d+) of (?<answers>\d+) answers \((?<share>[^)]+)\)$/",
    "display @timestamp, crawl, run_id, host, refusal, refused, answers, share",
    "sort @timestamp desc",
    "limit 100",
]


def run_metric(crawl: str, name: RunMetric, statistic: str, period: Duration = RUN_PERIOD) -> cw.Metric:
    """A finalizer metric exactly as emitted: our namespace, the name, the crawl as the only dimension."""
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=name.value,
        dimensions_map={CRAWL_DIMENSION: crawl},
        statistic=statistic,
        period=period,
        unit=cw.Unit[UNITS[name].name],
    )


PIPELINE_ALARMS = 6
"""Dead letters (the frontier's, the finalize shards'), each function's errors, the fetcher's throttles
(what docs/costs.md prices)."""
ALARMS_PER_CRAWL = 6
"""Record-count drop, error rate, unhealthy verdict, blocked host, run failed, Parquet copy failed; a scheduled
crawl adds its missing-run alarm."""


class Monitoring(Construct):
    """An encrypted SNS topic as every alarm's action; alarms per crawl and for the pipeline; a dashboard."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StackConfig,
        functions: Functions,
        queues: Queues,
        specs: list[CrawlSpec],
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, id)
        self.config = config
        key = kms.Key(self, "AlarmsKey", enable_key_rotation=True, description="Sluice alarm topic")
        # CloudWatch publishes alarms to the topic, so it must be able to use the topic's key.
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        self.topic = sns.Topic(self, "Alarms", display_name="Sluice alarms", master_key=key, enforce_ssl=True)
        if alarm_email:
            if not _EMAIL.fullmatch(alarm_email):
                raise ValueError(f"alarm_email {alarm_email!r} is not an email address")
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "sluice:NoAlarmSubscriber",
                "No alarm_email: the alarms publish to a topic nobody is subscribed to, so nobody is paged. "
                "Deploy with ALARM_EMAIL=you@example.com (or subscribe to the AlarmTopic output).",
            )
        self.alarms: list[cw.Alarm] = []
        for spec in specs:
            self._crawl_alarms(spec)
        self._pipeline_alarms(functions, queues)
        self.dashboard = self._dashboard(config, functions, queues, specs)

    def _alarm(
        self,
        name: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        above: bool,
        meaning: str,
        runbook: str,
        evaluations: int = 1,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
        crawl: str | None = None,
    ) -> cw.Alarm:
        """One alarm to the topic: ``sluice-STAGE-NAME``, its meaning and its runbook section in the description.

        ``crawl`` names the crawl a per-crawl alarm watches, as its ``crawl`` tag.
        """
        alarm = cw.Alarm(
            self,
            name,
            alarm_name=self.config.name(name),
            alarm_description=f"{meaning} See docs/operations.md#{runbook}",
            metric=metric,
            threshold=threshold,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD
            if above
            else cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=evaluations,
            datapoints_to_alarm=evaluations,
            treat_missing_data=missing,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        if crawl is not None:
            cdk.Tags.of(alarm).add(CRAWL_TAG, crawl)
        self.alarms.append(alarm)
        return alarm

    def _crawl_alarms(self, spec: CrawlSpec) -> None:
        # No run in an hour is neither a drop nor an error (the missing-run alarm covers silence).
        name, alerts = spec.name, spec.alerts
        self._alarm(
            f"{name}-record-count-drop",
            run_metric(name, RunMetric.RECORD_COUNT_RATIO, "Minimum"),
            threshold=alerts.record_count_floor,
            above=False,
            meaning=f"{name}: a run collected under {alerts.record_count_floor:.0%} of the previous run's records.",
            runbook="record-count-drop",
            crawl=name,
        )
        self._alarm(
            f"{name}-error-rate",
            run_metric(name, RunMetric.ERROR_RATE, "Maximum"),
            threshold=alerts.max_error_rate,
            above=True,
            meaning=f"{name}: more than {alerts.max_error_rate:.0%} of a run's pages failed.",
            runbook="error-rate",
            crawl=name,
        )
        self._alarm(
            f"{name}-host-blocked",
            run_metric(name, RunMetric.HOSTS_BLOCKED, "Maximum"),
            threshold=0,
            above=True,
            meaning=f"{name}: a site refused the crawler (403/429 or a block page); its URLs were skipped.",
            runbook="host-blocked",
            crawl=name,
        )
        self._alarm(
            f"{name}-run-unhealthy",
            run_metric(name, RunMetric.RUN_HEALTHY, "Minimum"),
            threshold=1,
            above=False,
            meaning=f"{name}: a run's verdict was unhealthy (unfinished, no records, or a check above).",
            runbook="run-unhealthy",
            crawl=name,
        )
        self._alarm(
            f"{name}-run-failed",
            run_metric(name, RunMetric.RUN_FAILED, "Maximum"),
            threshold=0,
            above=True,
            meaning=f"{name}: a run ended failed (too large, or finalizing failed past its retries): no output.",
            runbook="run-failed",
            crawl=name,
        )
        self._alarm(
            f"{name}-parquet-failed",
            run_metric(name, RunMetric.PARQUET_FAILED, "Maximum"),
            threshold=0,
            above=True,
            meaning=f"{name}: a run's Parquet copy (Athena UNLOAD) failed; its JSON Lines output is whole.",
            runbook="parquet-failed",
            crawl=name,
        )
        if spec.schedule:
            # The sweep judges the schedule (any period, a month included) and emits RunMissing every
            # sweep: the alarm needs one period whatever the schedule, within CloudWatch's 7-day range.
            self._alarm(
                f"{name}-missing-run",
                run_metric(
                    name,
                    RunMetric.RUN_MISSING,
                    "Maximum",
                    Duration.seconds(missing_run_period_s(self.config.sweep_minutes)),
                ),
                threshold=0,
                above=True,
                meaning=f"{name}: no run has finished within its schedule ({spec.schedule}) plus an hour.",
                runbook="missing-run",
                crawl=name,
                missing=cw.TreatMissingData.BREACHING,  # no datum means no sweep: silence is the failure
            )

    def _pipeline_alarms(self, functions: Functions, queues: Queues) -> None:
        for name, queue, meaning, runbook in (
            ("dead-letters", queues.dead_letters, "Messages reached the dead-letter queue.", "dead-letters"),
            (
                "finalize-dead-letters",
                queues.finalize_dead_letters,
                "A finalize shard task failed past its retries (its run ended failed, or will at the sweep).",
                "run-failed",
            ),
        ):
            self._alarm(
                name,
                queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5), statistic="Maximum"),
                threshold=0,
                above=True,
                meaning=meaning,
                runbook=runbook,
            )
        for label, function in (
            ("fetcher", functions.fetcher),
            ("scheduler", functions.scheduler),
            ("finalizer", functions.finalizer),
        ):
            self._alarm(
                f"{label}-errors",
                function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=0,
                above=True,
                meaning=f"The {label} function failed invocations.",
                runbook="function-errors",
            )
        self._alarm(
            "fetcher-throttles",
            functions.fetcher.metric_throttles(period=Duration.minutes(5), statistic="Sum"),
            threshold=0,
            above=True,
            meaning="The fetcher was throttled (account concurrency).",
            runbook="throttles",
            evaluations=2,
        )

    def _dashboard(
        self, config: StackConfig, functions: Functions, queues: Queues, specs: list[CrawlSpec]
    ) -> cw.Dashboard:
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=config.dashboard)
        for spec in specs:
            per_run = Duration.days(1)
            dashboard.add_widgets(
                cw.TextWidget(markdown=f"## {spec.name}", width=24, height=1),
                cw.GraphWidget(
                    title=f"{spec.name}: records per run",
                    left=[run_metric(spec.name, RunMetric.RECORDS_PER_RUN, "Maximum", per_run)],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{spec.name}: record-count ratio and error rate",
                    left=[
                        run_metric(spec.name, RunMetric.RECORD_COUNT_RATIO, "Minimum", per_run),
                        run_metric(spec.name, RunMetric.ERROR_RATE, "Maximum", per_run),
                    ],
                    left_annotations=[
                        cw.HorizontalAnnotation(value=spec.alerts.record_count_floor, label="record floor"),
                        cw.HorizontalAnnotation(value=spec.alerts.max_error_rate, label="error ceiling"),
                    ],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{spec.name}: pages per run",
                    left=[
                        run_metric(spec.name, RunMetric.PAGES_FETCHED, "Sum", per_run),
                        run_metric(spec.name, RunMetric.PAGES_NOT_MODIFIED, "Sum", per_run),
                        *(
                            [run_metric(spec.name, RunMetric.PAGES_NOT_DUE, "Sum", per_run)]
                            # only sitemap seeds and a recrawl schedule make pages not due
                            if spec.seeds.sitemaps is not None or spec.recrawl is not None
                            else []
                        ),
                        run_metric(spec.name, RunMetric.PAGES_FAILED, "Sum", per_run),
                    ],
                    stacked=True,
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{spec.name}: estimated cost per run (USD)",
                    # One datum per run: the average over a day is the cost of a run however many ran.
                    left=[
                        run_metric(spec.name, RunMetric.ESTIMATED_COST, "Average", per_run).with_(
                            label="USD per run (summary.json cost.estimated_usd)"
                        )
                    ],
                    left_y_axis=cw.YAxisProps(min=0),
                    width=12,
                ),
                cw.GraphWidget(
                    title=f"{spec.name}: hosts blocked per run",
                    left=[run_metric(spec.name, RunMetric.HOSTS_BLOCKED, "Maximum", per_run)],
                    left_y_axis=cw.YAxisProps(min=0),
                    width=12,
                ),
            )
        dashboard.add_widgets(
            cw.TextWidget(markdown="## Pipeline", width=24, height=1),
            cw.GraphWidget(
                title="Queue: visible, in flight, dead letters",
                left=[
                    queues.frontier.metric_approximate_number_of_messages_visible(),
                    queues.frontier.metric_approximate_number_of_messages_not_visible(),
                    queues.dead_letters.metric_approximate_number_of_messages_visible(),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Fetcher: invocations, errors, throttles",
                left=[
                    functions.fetcher.metric_invocations(),
                    functions.fetcher.metric_errors(),
                    functions.fetcher.metric_throttles(),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Fetcher: duration (p50, p99)",
                left=[
                    functions.fetcher.metric_duration(statistic="p50"),
                    functions.fetcher.metric_duration(statistic="p99"),
                ],
                width=8,
            ),
            cw.LogQueryWidget(
                title="Hosts blocked: refusals per host when the breaker paused it",
                log_group_names=[functions.fetcher.log_group.log_group_name],
                query_lines=_BLOCKED_HOSTS_QUERY,
                view=cw.LogQueryVisualizationType.TABLE,
                width=24,
            ),
            cw.AlarmStatusWidget(alarms=self.alarms, title="Alarms", width=24),
        )
        return dashboard

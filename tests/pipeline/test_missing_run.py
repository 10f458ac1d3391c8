"""The sweep judges each scheduled crawl against its own schedule: a fortnightly crawl is not missing a run
a week after its last one (a CloudWatch window of at most 7 days would say it is)."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice.handlers import finalizer
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate.context import LocalContext

from .conftest import AwsHarness, PipelineOn, SpecData

SWEEP = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
DAY_S = 86400


def sweep() -> dict[str, Any]:
    return finalizer.handler(
        SWEEP, cast(LambdaContext, LocalContext(function_name="sluice-dev-finalizer", timeout_s=900))
    )


def test_the_sweep_reports_a_run_missing_only_after_the_crawls_own_period(
    aws_pipeline: PipelineOn[AwsHarness], site: RunningDemoSite, books_spec: SpecData
) -> None:
    pipeline = aws_pipeline
    pipeline.spec(books_spec("fortnightly", site.base_url, pages=1) | {"schedule": "rate(14 days)"})
    pipeline.spec(books_spec("monthly", site.base_url, pages=1) | {"schedule": "cron(0 3 1 * ? *)"})
    pipeline.spec(books_spec("unscheduled", site.base_url, pages=1))
    for crawl in ("fortnightly", "monthly"):
        pipeline.start(crawl)
        pipeline.drain()
    answer = sweep()
    assert sorted(f["crawl"] for f in answer["finalized"]) == ["fortnightly", "monthly"]
    assert answer["missing_runs"] == []

    pipeline.clock.advance(10 * DAY_S)  # past any 7-day CloudWatch window, within both schedules
    assert sweep()["missing_runs"] == []
    pipeline.clock.advance(5 * DAY_S)  # 15 days: the fortnightly crawl's period and hour are over
    assert sweep()["missing_runs"] == ["fortnightly"]
    pipeline.clock.advance(17 * DAY_S)  # 32 days
    assert sweep()["missing_runs"] == ["fortnightly", "monthly"]

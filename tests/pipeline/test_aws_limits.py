"""The pipeline under AWS's own limits, which moto does not enforce (``sluice_tools.emulate.limits``).

Each limit is scaled down so a small run reaches it; the run must come out as it does unlimited,
its throttled calls absorbed by botocore's retries (adaptive mode, 8 attempts) and SQS redelivery.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.config import Config
from botocore.retries.bucket import TokenBucket
from botocore.retries.standard import ExponentialBackoff, ThrottledRetryableChecker
from botocore.session import get_session
from infra.config import DEFAULT
from moto import mock_aws

from sluice.adapters.aws.clients import client, reset
from sluice.domain.hosts import host_key
from sluice.pipeline import robots
from sluice.pipeline.visit import batch as visit
from sluice.pipeline.visit import page as page_visit
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.emulate import runner as runner_module
from sluice_tools.emulate.limits import DynamoError, Limits, enforced, partition_of
from sluice_tools.emulate.runner import EmulatedRunner

from .conftest import AwsHarness, PipelineOn, SpecData

CRAWL = "limited"
LISTINGS = 5
BACKOFF_SCALE = 0.1
"""botocore waits up to 2^attempt s (20 at most) after a throttle: a tenth here (the limits are scaled down)."""


@pytest.fixture(autouse=True)
def scaled_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's own retry decisions and attempts, its waits scaled as the limits are."""
    real = ExponentialBackoff.delay_amount

    def delay_amount(self: ExponentialBackoff, context: Any) -> float:
        return float(real(self, context)) * BACKOFF_SCALE

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", delay_amount)
    # Adaptive mode's client-side limiter falls to 0.5 requests a second at the least: scaled as well.
    monkeypatch.setattr(TokenBucket.__init__, "__defaults__", (TokenBucket._MIN_RATE / BACKOFF_SCALE,))


def _runner(tmp_path: Path, site: RunningDemoSite, books_spec: SpecData) -> tuple[EmulatedRunner, Any]:
    data = books_spec(CRAWL, site.base_url)  # 5 listing pages of 20 books
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return EmulatedRunner(crawls, tmp_path / "moto", workers=4, allow_loopback=True), parse_spec(data)


@pytest.mark.timeout(300)  # two runs whose calls are refused and retried with waits: ~45 s, more under load
def test_a_first_and_a_nightly_run_come_out_exact_while_dynamodb_and_s3_throttle(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData
) -> None:
    runner, spec = _runner(tmp_path, site, books_spec)
    limits = Limits(
        dynamo_write_units=4,
        dynamo_read_units=8,
        dynamo_partitions=2,
        s3_writes_per_prefix=1,
        s3_reads_per_prefix=2,
        fifo_window=20,  # the demo's one host: its messages queue behind one another, the window sees the head
        fifo_in_flight=10,
    )
    with enforced(limits) as refused:
        first_run = runner.run(spec)
        nightly_run = runner.run(spec)
    first, nightly = first_run.summary.to_json(), nightly_run.summary.to_json()
    by_service = {
        service: sum(n for k, n in refused.throttled.items() if k.startswith(service)) for service in ("dynamodb", "s3")
    }
    assert by_service["dynamodb"] > 0, refused.throttled
    assert by_service["s3"] > 0, refused.throttled
    assert (first["status"], first["pages"]["fetched"], first["records"]["total"]) == ("finished", LISTINGS, 100)
    assert first["verdict"]["healthy"] is True
    assert (nightly["status"], nightly["pages"]["not_modified"], nightly["records"]["total"]) == (
        "finished",
        LISTINGS,
        100,
    )
    assert nightly["verdict"]["healthy"] is True
    assert first_run.dead_letters == nightly_run.dead_letters == []


def quick(service: str) -> Any:
    """A client retrying as the stack's do (botocore's standard checks: adaptive mode adds a rate limiter), three
    attempts and no client-side limiter: the answer's shape, without adaptive mode's waits."""
    return get_session().create_client(
        service, region_name="us-east-1", config=Config(retries={"max_attempts": 2, "mode": "standard"})
    )


def test_the_stacks_clients_retry_every_answer_the_limits_give() -> None:
    """Adaptive mode, 8 retries: botocore counts these codes as throttling (retried, and slowing the client)."""
    config = client("dynamodb", "us-east-1").meta.config
    assert config.retries == {"total_max_attempts": 9, "mode": "adaptive"}
    throttled = ThrottledRetryableChecker()
    for code in ("ProvisionedThroughputExceededException", "ThrottlingException", "SlowDown"):
        assert code in throttled._THROTTLED_ERROR_CODES


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_a_partition_past_its_units_is_refused_with_dynamodbs_own_error_and_retried(code: DynamoError) -> None:
    """The answer comes at the HTTP boundary: botocore's retries see it as AWS's, and its last attempt's error is
    the service's code. Items on another partition are not refused."""
    with mock_aws():
        reset()
        dynamo = quick("dynamodb")
        dynamo.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        keys = [f"k{n}" for n in range(40)]
        on = {k: partition_of("t", {"pk": {"S": k}}, "pk", 2) for k in keys}
        hot = [k for k in keys if on[k] == 0]
        cold = [k for k in keys if on[k] == 1]
        assert hot
        assert cold
        # A clock that never moves: the second's units are spent once and for all.
        with enforced(Limits(dynamo_write_units=1, dynamo_partitions=2, dynamo_error=code), clock=lambda: 0.0) as log:
            dynamo.put_item(TableName="t", Item={"pk": {"S": hot[0]}})
            dynamo.put_item(TableName="t", Item={"pk": {"S": cold[0]}})  # another partition: its own units
            with pytest.raises(dynamo.exceptions.ClientError) as refused:
                dynamo.put_item(TableName="t", Item={"pk": {"S": hot[1]}})
        assert refused.value.response["Error"]["Code"] == code
        assert refused.value.response["ResponseMetadata"]["RetryAttempts"] == 2  # retried, each refused
        assert log.throttled["dynamodb.PutItem"] == 3
        reset()


def test_s3_past_its_rate_on_a_prefix_answers_slowdown_and_other_prefixes_are_free() -> None:
    with mock_aws():
        reset()
        s3 = quick("s3")
        s3.create_bucket(Bucket="limits-bucket")
        with enforced(Limits(s3_writes_per_prefix=2), clock=lambda: 0.0) as log:
            s3.put_object(Bucket="limits-bucket", Key="work/a/1", Body=b"1")
            s3.put_object(Bucket="limits-bucket", Key="work/a/2", Body=b"2")
            s3.put_object(Bucket="limits-bucket", Key="work/b/1", Body=b"3")  # another prefix
            with pytest.raises(s3.exceptions.ClientError) as refused:
                s3.put_object(Bucket="limits-bucket", Key="work/a/3", Body=b"4")
        assert (
            refused.value.response["Error"]["Code"],
            refused.value.response["ResponseMetadata"]["HTTPStatusCode"],
        ) == (
            "SlowDown",
            503,
        )
        assert log.throttled["s3.PUT"] == 3
        assert s3.get_object(Bucket="limits-bucket", Key="work/b/1")["Body"].read() == b"3"
        reset()


def test_a_fifo_receive_finds_groups_only_in_the_head_window_and_keeps_under_the_in_flight_quota() -> None:
    with mock_aws():
        reset()
        sqs = client("sqs", "us-east-1")
        url = sqs.create_queue(
            QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        )["QueueUrl"]
        for n in range(6):
            sqs.send_message(QueueUrl=url, MessageBody=f"a{n}", MessageGroupId="a")
        sqs.send_message(QueueUrl=url, MessageBody="b0", MessageGroupId="b")
        with enforced(Limits(fifo_window=5, fifo_in_flight=3)) as log:
            first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            assert [m["Body"] for m in first] == ["a0", "a1", "a2"]  # the quota: 3 in flight
            assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []  # b hidden
            for message in first:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            # Three fewer ahead of it: b0 is the 4th message now, inside the window (a3-a5 come first: 3 in flight).
            second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            for message in second:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        assert [m["Body"] for m in second] == ["a3", "a4", "a5"]
        assert bodies == ["b0"]
        assert log.window_receives >= 1
        assert log.quota_receives >= 1
        reset()


def test_a_fan_out_of_a_big_host_first_reaches_every_host_in_moto_s_emulated_window(
    aws_pipeline: PipelineOn[AwsHarness],
) -> None:
    """The big-host-first seed file of tests/pipeline/test_fanout_window.py on moto, with SQS's window played."""
    pipeline = aws_pipeline
    small = [f"http://127.0.0.1:{20_000 + h}/s/{n}.html" for h in range(50) for n in range(20)]
    lines = [f"http://127.0.0.1:9/big/{n}.html" for n in range(20_000)] + small
    pipeline.spec(
        {
            "name": "skewed",
            "seeds": {"file": "seeds.txt"},
            "follow": {"max_pages": 30_000, "max_depth": 0, "allowed_domains": ["127.0.0.1"]},
            "extract": {"fields": {"title": "h1::text"}},
        }
    )
    from sluice.domain.layout import seeds_key

    pipeline.services.objects.put(seeds_key("skewed", "seeds.txt"), ("\n".join(lines) + "\n").encode(), "text/plain")
    pipeline.start("skewed")
    with enforced(Limits(fifo_window=200, fifo_in_flight=200)):
        hosts = set()
        for _ in range(60):  # a fleet of 60, each holding its batch: what the window lets them see
            for message in pipeline.receive(10):
                hosts |= {host_key(t["url"]) for t in json.loads(message.body)["tasks"]}
    assert len(hosts) == 51


@pytest.mark.timeout(300)  # the stopped batch comes back after the stack's visibility, 12 s
def test_a_fetcher_stopped_at_its_timeout_mid_batch_leaves_the_run_exact(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda stops the first invocation mid-fetch (the site answers in 3 s, the fetcher's timeout is 2 s): it
    wrote nothing, its batch comes back after the stack's visibility (6 x 2 s), and the second one does it all."""
    fetcher_settings = replace(DEFAULT.fetcher, timeout_s=2)
    config = replace(DEFAULT, fetcher=fetcher_settings)
    # The fetcher keeps 20 s in hand and bounds each fetch by what is left: taken away here, so that a fetch
    # runs past the deadline and Lambda's stop is what ends the invocation.
    monkeypatch.setattr(page_visit, "TIME_MARGIN_S", -10.0)
    monkeypatch.setattr(visit, "PACK_MIN_TIME_S", 0.0)
    # A redelivery waits up to 10 s for the robots.txt answer the stopped invocation was to share: scaled too.
    monkeypatch.setattr(robots, "WAIT_S", 0.3)
    data = books_spec(CRAWL, site.base_url)
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    site.set_config(latency_ms=3000)
    real_drop = runner_module._drop_container

    def drop_and_heal() -> None:
        real_drop()
        site.set_config(latency_ms=0)  # the site is quick again for the redelivery

    monkeypatch.setattr(runner_module, "_drop_container", drop_and_heal)
    runner = EmulatedRunner(
        crawls, tmp_path / "moto", workers=1, allow_loopback=True, config=config, lambda_timeouts=True
    )
    run = runner.run(parse_spec(data))
    summary = run.summary.to_json()
    assert runner.timed_out == 1
    assert (summary["status"], summary["pages"]["fetched"], summary["records"]["total"]) == ("finished", 5, 100)
    assert summary["verdict"]["healthy"] is True
    assert run.dead_letters == []

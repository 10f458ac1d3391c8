"""Integration fixtures for the pipeline: moto, the demo site over loopback, and an event source mapping played by hand.

``pipeline`` starts moto, creates the stack's resources, installs :class:`Services` whose async
triggers are plain lists, and hands out a :class:`Pipeline` whose helpers play the SQS event
source mapping one step at a time (receive, invoke the real fetcher handler with a real SQS event,
delete what succeeded), so a test can inject a fault between any two steps.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from aws_lambda_powertools.utilities.typing import LambdaContext
from infra.config import DEFAULT
from moto import mock_aws

from sluice.aws import clients
from sluice.aws.clients import client
from sluice.aws.ledger import RunState
from sluice.handlers import fetcher, finalizer, runtime, scheduler
from sluice.observability import logger
from sluice.pipeline.services import Services, load_crawl
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.resources import create_resources, dlq_url, fake_credentials, serialized_calls
from sluice_tools.emulate.runner import sqs_record

BOOKS = 100
"""Demo catalogue size for these tests: 5 listing pages of 20 books."""
PAGES = BOOKS // 20
MAX_STEPS = 200
"""Upper bound on event-source-mapping steps in any drain (every loop here is bounded)."""

Message = dict[str, Any]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is bounded in time (pytest-timeout)."""
    for item in items:
        if "tests/pipeline" in str(item.path):
            item.add_marker(pytest.mark.timeout(90))


def books_spec(
    name: str,
    base_url: str,
    *,
    pages: int = PAGES,
    urls: Sequence[str] = (),
    retry_times: int = 2,
    max_depth: int = 1,
    max_error_rate: float = 0.05,
) -> dict[str, Any]:
    """The demo crawl (crawls/demo-books.yaml) aimed at ``base_url``, with tiny backoffs."""
    seeds: dict[str, Any] = {"urls": [f"{base_url}{u}" if u.startswith("/") else u for u in urls]}
    if pages:
        seeds |= {"template": f"{base_url}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": pages}}
    return {
        "name": name,
        "seeds": seeds,
        "follow": {"selectors": ["li.next a"], "max_depth": max_depth, "max_pages": 500},
        "extract": {
            "item": "article.product_pod",
            "pages": r"/catalogue/page-\d+\.html$",
            "fields": {
                "title": {"selector": "h3 a::attr(title)", "required": True},
                "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"], "required": True},
                "price": {"selector": "p.price_color::text", "process": ["strip", "price"], "required": True},
                "rating": {"selector": "p.star-rating::attr(class)", "process": [{"regex": r"star-rating (\w+)"}]},
            },
            "key": ["url"],
        },
        "politeness": {
            "concurrency": 8,
            "concurrency_per_domain": 8,
            "timeout_seconds": 5,
            "retry": {"times": retry_times, "backoff_base_seconds": 0.01, "backoff_max_seconds": 0.02},
        },
        "alerts": {"record_count_floor": 0.8, "max_error_rate": max_error_rate},
    }


def write_spec(specs_dir: Path, data: dict[str, Any]) -> CrawlSpec:
    """Validate ``data`` as a spec and write it where the functions look for it: ``<name>.yaml``."""
    spec = parse_spec(data)
    specs_dir.mkdir(parents=True, exist_ok=True)
    (specs_dir / f"{spec.name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    load_crawl.cache_clear()
    return spec


def context(function: str, timeout_s: int = 900) -> LambdaContext:
    return cast(LambdaContext, LocalContext(function_name=f"sluice-test-{function}", timeout_s=timeout_s))


@dataclass
class Logs:
    """The functions' JSON log lines (Powertools Logger), captured for assertions."""

    stream: io.StringIO = field(default_factory=io.StringIO)

    def events(self) -> list[dict[str, Any]]:
        found = []
        for line in self.stream.getvalue().splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return found

    def named(self, message: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("message") == message]


@pytest.fixture(autouse=True)
def logs() -> Iterator[Logs]:
    """Send the functions' log lines to a buffer (stdout stays for EMF documents, which capsys reads)."""
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    captured = Logs()
    previous = handler.setStream(captured.stream)
    try:
        yield captured
    finally:
        handler.setStream(previous)


SpecData = Callable[..., dict[str, Any]]


@pytest.fixture(name="books_spec")
def books_spec_fixture() -> SpecData:
    """:func:`books_spec` (test modules cannot import conftest under --import-mode=importlib)."""
    return books_spec


@pytest.fixture
def site() -> Iterator[RunningDemoSite]:
    with running_demo_site(books=BOOKS) as running:
        yield running


class Pipeline:
    """The deployed pipeline on moto, with the event source mapping and Lambda's async invokes played by hand."""

    def __init__(self, specs_dir: Path) -> None:
        self.specs_dir = specs_dir
        self.settings = create_resources(DEFAULT, specs_dir, allow_loopback=True).model_copy(
            # Transient failures come back at once (tests need not wait); a Retry-After still sets its delay.
            update={"visibility_base_s": 0.0, "visibility_max_s": 60.0}
        )
        self.finalize_requests: list[dict[str, object]] = []
        self.start_requests: list[dict[str, object]] = []
        self.visibility_changes: list[dict[str, Any]] = []
        self.sqs = client("sqs")
        self.sqs.meta.events.register("before-parameter-build.sqs.ChangeMessageVisibility", self._record_visibility)
        self.services = self._build()

    def _record_visibility(self, params: dict[str, Any], **_: Any) -> None:
        self.visibility_changes.append(dict(params))

    def _build(self) -> Services:
        services = Services.build(
            self.settings, finalize_later=self.finalize_requests.append, continue_start=self.start_requests.append
        )
        runtime.install(services)
        return services

    def configure(self, **settings: Any) -> None:
        """Change settings (e.g. ``urls_per_message``) and rebuild the services the handlers use."""
        self.settings = self.settings.model_copy(update=settings)
        self.services = self._build()

    def spec(self, data: dict[str, Any]) -> CrawlSpec:
        return write_spec(self.specs_dir, data)

    # -- scheduler and finalizer ----------------------------------------------------------------

    def start(self, crawl: str) -> str:
        """Invoke the scheduler as the EventBridge rule does; return the run id."""
        answer = scheduler.handler({"crawl": crawl}, context("scheduler"))
        assert answer["complete"] is True
        return str(answer["run_id"])

    def finalize(self) -> list[dict[str, Any]]:
        """Run the finalizer for every finalize request the fetchers made (Lambda's async invokes)."""
        finalized: list[dict[str, Any]] = []
        for _ in range(MAX_STEPS):
            if not self.finalize_requests:
                return finalized
            finalized += finalizer.handler(self.finalize_requests.pop(0), context("finalizer"))["finalized"]
        raise AssertionError(f"still finalize requests after {MAX_STEPS} finalizer invocations")

    # -- the event source mapping -----------------------------------------------------------------

    def receive(self, max_messages: int = 10) -> list[Message]:
        messages: list[Message] = self.sqs.receive_message(
            QueueUrl=self.settings.queue_url,
            MaxNumberOfMessages=max_messages,
            MessageSystemAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        return messages

    def invoke(self, messages: Sequence[Message]) -> set[str]:
        """Invoke the fetcher with these messages as one SQS event; return the ids it reported failed."""
        event = {"Records": [sqs_record(m, self.settings.queue_url) for m in messages]}
        answer = fetcher.handler(event, context("fetcher", 120))
        return {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}

    def ack(self, messages: Sequence[Message], failed: set[str] | None = None) -> None:
        done = [m for m in messages if m["MessageId"] not in (failed or set())]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(
                QueueUrl=self.settings.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
                ],
            )

    def deliver(self, messages: Sequence[Message]) -> set[str]:
        """One invocation as the event source mapping makes it: invoke, then delete what succeeded."""
        failed = self.invoke(messages)
        self.ack(messages, failed)
        return failed

    def make_visible(self, messages: Sequence[Message]) -> None:
        """As if the visibility timeout of messages received but never deleted ran out."""
        for m in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.settings.queue_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
            )

    def drain(self, batch_size: int = 10) -> int:
        """Deliver batches until nothing is visible in the queue; return the number of invocations."""
        for steps in range(MAX_STEPS):
            messages = self.receive(batch_size)
            if not messages:
                return steps
            self.deliver(messages)
        raise AssertionError(f"queue not drained after {MAX_STEPS} invocations")

    def run(self, crawl: str) -> str:
        """A whole run: schedule, drain the queue, finalize; return the run id."""
        run_id = self.start(crawl)
        self.drain()
        finalized = self.finalize()
        assert [f["run_id"] for f in finalized] == [run_id], finalized
        return run_id

    # -- what a run left behind -------------------------------------------------------------------

    def run_state(self, crawl: str, run_id: str) -> RunState:
        run = self.services.ledger.get_run(crawl, run_id)
        assert run is not None
        return run

    def records(self, crawl: str, run_id: str) -> list[dict[str, Any]]:
        return self.services.objects.read_lines(self.services.objects.records_key(crawl, run_id))

    def summary(self, crawl: str, run_id: str) -> dict[str, Any]:
        key = self.services.objects.summary_key(crawl, run_id)
        summary: dict[str, Any] = json.loads(
            client("s3").get_object(Bucket=self.settings.bucket, Key=key)["Body"].read()
        )
        return summary

    def object_keys(self, run_id: str) -> set[str]:
        """Every object in the bucket that belongs to ``run_id``."""
        keys: set[str] = set()
        for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=self.settings.bucket):
            keys |= {o["Key"] for o in page.get("Contents", []) if run_id in o["Key"]}
        return keys

    def in_queue(self) -> int:
        """Messages in the queue, visible or in flight."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.settings.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def dead_letters(self) -> list[str]:
        """Bodies in the dead-letter queue (received and left there)."""
        url = dlq_url(DEFAULT)
        bodies: dict[str, str] = {}
        for _ in range(20):
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60).get(
                "Messages", []
            )
            if not batch:
                break
            bodies |= {m["MessageId"]: m["Body"] for m in batch}
        return list(bodies.values())

    def send_raw(self, *bodies: str) -> None:
        """Put bodies on the queue as they are (malformed ones included)."""
        self.sqs.send_message_batch(
            QueueUrl=self.settings.queue_url,
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)],
        )


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    """moto with the stack's queue, dead-letter queue, tables and bucket; handlers wired to in-memory triggers."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "testing")  # restored after the test; fake_credentials() sets the real values
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws(), serialized_calls():
        fake_credentials()
        try:
            yield Pipeline(tmp_path / "crawls")
        finally:
            fetcher.close_container()
            runtime.reset()
            clients.reset()
            load_crawl.cache_clear()

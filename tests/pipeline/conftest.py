"""Integration fixtures for the pipeline: both adapter sets, the demo site on loopback, the event source by hand.

``pipeline`` is parametrized over the two adapter sets, so every test that takes it runs twice:

- ``aws``: moto with the stack's queue, dead-letter queue, tables and bucket, and the real Lambda
  handlers invoked with real SQS events;
- ``local``: the state folder's SQLite file and objects, and the pipeline steps called as the
  local runner calls them.

Either way a :class:`Harness` plays the event source mapping one step at a time (receive,
invoke, delete what succeeded), so a test can inject a fault between any two steps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast

import pytest
import yaml
from aws_lambda_powertools.utilities.typing import LambdaContext
from infra.config import DEFAULT
from moto import mock_aws

from sluice.adapters.aws import clients
from sluice.adapters.aws.clients import client
from sluice.adapters.local import LocalStore
from sluice.domain.clock import ShiftedClock
from sluice.domain.layout import manifest_key, summary_key
from sluice.domain.runs import RunState
from sluice.domain.tally import RunTally
from sluice.handlers import bootstrap, fetcher, finalizer, scheduler
from sluice.messages import QueuedMessage, StartEvent
from sluice.observability import logger
from sluice.pipeline.finalize.driver import finalize_run, sweep
from sluice.pipeline.services import Services, Tuning, load_crawl
from sluice.pipeline.start.fanout import start_run
from sluice.pipeline.visit.batch import visit_batch
from sluice.pipeline.visit.container import Container
from sluice.ports import HostBook
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.events import sqs_record
from sluice_tools.emulate.resources import create_resources, dlq_url, fake_credentials, serialized_calls
from sluice_tools.emulate.shards import drain_shards

BOOKS = 100
"""Demo catalogue size for these tests: 5 listing pages of 20 books."""
PAGES = BOOKS // 20
MAX_STEPS = 200
"""Upper bound on event-source-mapping steps in any drain (every loop here is bounded)."""


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
    max_depth: int | None = 1,
    max_error_rate: float = 0.05,
    max_pages: int = 500,
) -> dict[str, Any]:
    """The demo crawl (crawls/demo-books.yaml) aimed at ``base_url``, with tiny backoffs."""
    seeds: dict[str, Any] = {"urls": [f"{base_url}{u}" if u.startswith("/") else u for u in urls]}
    if pages:
        seeds |= {"template": f"{base_url}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": pages}}
    return {
        "name": name,
        "seeds": seeds,
        "follow": {"selectors": ["li.next a"], "max_depth": max_depth, "max_pages": max_pages},
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


class SpecData(Protocol):
    """The ``books_spec`` fixture: :func:`books_spec` itself, so a test's keyword arguments are checked against it."""

    def __call__(
        self,
        name: str,
        base_url: str,
        *,
        pages: int = ...,
        urls: Sequence[str] = ...,
        retry_times: int = ...,
        max_depth: int | None = ...,
        max_error_rate: float = ...,
        max_pages: int = ...,
    ) -> dict[str, Any]: ...


FINALIZE_SHARD_PAGES = 30
"""Pages a finalize shard holds in these tests: a run of 100 pages is finalized by 4 shards, one of 500 by 32, so every
behavioural test also checks that shards combine into what one finalizer would write."""


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
    """The pipeline's JSON log lines (Powertools Logger), captured for assertions."""

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
    """Send the pipeline's log lines to a buffer (stdout stays for EMF documents, which capsys reads)."""
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    captured = Logs()
    previous = handler.setStream(captured.stream)
    try:
        yield captured
    finally:
        handler.setStream(previous)


@pytest.fixture(name="books_spec")
def books_spec_fixture() -> SpecData:
    """:func:`books_spec` (test modules cannot import conftest under --import-mode=importlib)."""
    return books_spec


@pytest.fixture
def site() -> Iterator[RunningDemoSite]:
    with running_demo_site(books=BOOKS) as running:
        yield running


@dataclass(frozen=True, slots=True)
class Message:
    """A received queue message, whichever queue it came from."""

    id: str
    receipt: str
    body: str
    receives: int


class Harness(Protocol):
    """The pipeline on one adapter set, with the event source mapping and async invokes played by hand."""

    kind: str
    specs_dir: Path
    """Where :meth:`spec` writes the spec files the functions read."""
    services: Services
    clock: ShiftedClock
    """What the pipeline takes for now, on either adapter set: the services and every adapter read it. ``advance``
    it instead of sleeping: to pass a run's deadline, to make the next run a night later. Moto's SQS keeps its own
    time (a hidden message stays hidden there: :meth:`make_visible` it), where the local queue counts in this one."""
    finalize_requests: list[dict[str, object]]
    start_requests: list[dict[str, object]]
    visibility_changes: list[tuple[str, int]]
    """(receipt, seconds) of every visibility change the fetcher asked for."""

    @property
    def max_receive_count(self) -> int: ...

    def configure(self, **changes: Any) -> None: ...

    def spec(self, data: dict[str, Any]) -> CrawlSpec: ...

    def start(self, crawl: str) -> str: ...

    def receive(self, max_messages: int = 10) -> list[Message]: ...

    def invoke(self, messages: Sequence[Message], time_left_s: float | None = None) -> set[str]: ...

    def ack(self, messages: Sequence[Message], failed: set[str] | None = None) -> None: ...

    def make_visible(self, messages: Sequence[Message]) -> None: ...

    def send_raw(self, *bodies: str) -> None: ...

    def in_queue(self) -> int: ...

    def dead_letters(self) -> list[str]: ...

    def sweep(self) -> list[dict[str, Any]]: ...

    def finalize_one(self, request: dict[str, object]) -> list[dict[str, Any]]: ...

    def finalize_shards(self) -> list[dict[str, Any]]:
        """Deliver queued finalize shard tasks (AWS); what they finalized."""
        ...

    def close_container(self) -> None: ...


HarnessT = TypeVar("HarnessT", bound=Harness, covariant=True)


class PipelineOn(Generic[HarnessT]):
    """What every test drives: one :class:`Harness` and the helpers written once on top of it.

    The harness's members are passed through one by one (no ``__getattr__``), so a test is type-checked
    against what both adapter sets implement. ``PipelineOn[LocalHarness]`` (``local_pipeline``) also
    reaches the local store through :attr:`harness`.
    """

    def __init__(self, harness: HarnessT) -> None:
        self._harness = harness

    @property
    def harness(self) -> HarnessT:
        """The adapter set itself, typed as the fixture gives it."""
        return self._harness

    @property
    def kind(self) -> str:
        return self.harness.kind

    @property
    def specs_dir(self) -> Path:
        return self.harness.specs_dir

    @property
    def services(self) -> Services:
        return self.harness.services

    @property
    def clock(self) -> ShiftedClock:
        return self.harness.clock

    @property
    def finalize_requests(self) -> list[dict[str, object]]:
        return self.harness.finalize_requests

    @property
    def start_requests(self) -> list[dict[str, object]]:
        return self.harness.start_requests

    @property
    def visibility_changes(self) -> list[tuple[str, int]]:
        return self.harness.visibility_changes

    @property
    def max_receive_count(self) -> int:
        return self.harness.max_receive_count

    def configure(self, **changes: Any) -> None:
        self.harness.configure(**changes)

    def spec(self, data: dict[str, Any]) -> CrawlSpec:
        return self.harness.spec(data)

    def start(self, crawl: str) -> str:
        return self.harness.start(crawl)

    def receive(self, max_messages: int = 10) -> list[Message]:
        return self.harness.receive(max_messages)

    def invoke(self, messages: Sequence[Message], time_left_s: float | None = None) -> set[str]:
        return self.harness.invoke(messages, time_left_s)

    def ack(self, messages: Sequence[Message], failed: set[str] | None = None) -> None:
        self.harness.ack(messages, failed)

    def make_visible(self, messages: Sequence[Message]) -> None:
        self.harness.make_visible(messages)

    def send_raw(self, *bodies: str) -> None:
        self.harness.send_raw(*bodies)

    def in_queue(self) -> int:
        return self.harness.in_queue()

    def dead_letters(self) -> list[str]:
        return self.harness.dead_letters()

    def sweep(self) -> list[dict[str, Any]]:
        return self.harness.sweep()

    def finalize_one(self, request: dict[str, object]) -> list[dict[str, Any]]:
        return self.harness.finalize_one(request)

    def finalize_shards(self) -> list[dict[str, Any]]:
        return self.harness.finalize_shards()

    def close_container(self) -> None:
        self.harness.close_container()

    def deliver(self, messages: Sequence[Message]) -> set[str]:
        """One invocation as the event source mapping makes it: invoke, then delete what succeeded."""
        failed = self.harness.invoke(messages)
        self.harness.ack(messages, failed)
        return failed

    @property
    def hosts(self) -> HostBook:
        """The fleet's host book, which both adapter sets wire (``Services.hosts`` is optional for other callers)."""
        book = self.services.hosts
        assert book is not None
        return book

    def let_pauses_pass(self, *hosts: str) -> None:
        """As if every pause and spacing the fleet keeps for ``hosts`` had run out (a test does not wait 8 s)."""
        book = self.hosts
        states = book.load(list(hosts))
        book.save([dataclasses.replace(s, paused_until=0.0, next_start=0.0) for s in states.values()])
        self.harness.close_container()  # a new container: no fetcher remembers the pause either

    def drain(self, batch_size: int = 10) -> int:
        """Deliver batches until nothing is visible in the queue; return the number of invocations."""
        for steps in range(MAX_STEPS):
            messages = self.harness.receive(batch_size)
            if not messages:
                return steps
            self.deliver(messages)
        raise AssertionError(f"queue not drained after {MAX_STEPS} invocations")

    def finalize(self) -> list[dict[str, Any]]:
        """Run the finalizer for every finalize request the fetchers made (Lambda's async invokes)."""
        finalized: list[dict[str, Any]] = []
        requests = self.harness.finalize_requests
        for _ in range(MAX_STEPS):
            if not requests:
                return finalized
            finalized += self.harness.finalize_one(requests.pop(0))
        raise AssertionError(f"still finalize requests after {MAX_STEPS} finalizer invocations")

    def run(self, crawl: str) -> str:
        """A whole run: schedule, drain the queue, finalize; return the run id."""
        run_id = self.harness.start(crawl)
        self.drain()
        finalized = self.finalize()
        assert [f["run_id"] for f in finalized] == [run_id], finalized
        return run_id

    def run_state(self, crawl: str, run_id: str) -> RunState:
        run = self.services.ledger.get_run(crawl, run_id)
        assert run is not None
        return run

    def active_run_id(self, crawl: str) -> str | None:
        """The run that holds the crawl's lock, if one does."""
        lock = self.services.ledger.active_run(crawl)
        return None if lock is None else lock.run_id

    def tally(self, crawl: str, run_id: str) -> RunTally:
        """The run's exact counts, from its URLs, as the finalizer counts them."""
        return RunTally.of(self.run_state(crawl, run_id).seeds, self.services.frontier.scan(run_id))

    def summary(self, crawl: str, run_id: str) -> dict[str, Any]:
        raw = self.services.objects.get(summary_key(crawl, run_id))
        assert raw is not None, f"no summary for {run_id}"
        summary: dict[str, Any] = json.loads(raw)
        return summary

    def manifest(self, crawl: str, run_id: str) -> dict[str, Any]:
        """The run's manifest: the output files it lists."""
        raw = self.services.objects.get(manifest_key(crawl, run_id))
        assert raw is not None, f"no manifest for {run_id}"
        manifest: dict[str, Any] = json.loads(raw)
        return manifest

    def records(self, crawl: str, run_id: str) -> list[dict[str, Any]]:
        """Every record line of the run's output files, as the manifest lists them."""
        lines: list[dict[str, Any]] = []
        for file in self.manifest(crawl, run_id)["files"]:
            body = self.services.objects.get(file["key"])
            assert body is not None
            lines += [json.loads(line) for line in body.splitlines() if line]
        return lines


class AwsHarness:
    """The deployed pipeline on moto: real handlers, real SQS events, the stack's resources."""

    kind = "aws"

    def __init__(self, specs_dir: Path) -> None:
        self.specs_dir = specs_dir
        self.clock = ShiftedClock()
        self.settings = create_resources(DEFAULT, specs_dir, allow_loopback=True).model_copy(
            # Transient failures come back at once (tests need not wait); a Retry-After still sets its delay.
            # Finalize shards of a few pages: every test's run is finalized by many shards.
            update={"visibility_base_s": 0.0, "visibility_max_s": 60.0, "finalize_shard_pages": FINALIZE_SHARD_PAGES}
        )
        self.finalize_requests: list[dict[str, object]] = []
        self.start_requests: list[dict[str, object]] = []
        self.visibility_changes: list[tuple[str, int]] = []
        self.sqs = client("sqs")
        self.sqs.meta.events.register("before-parameter-build.sqs.ChangeMessageVisibility", self._record_visibility)
        self.services = self._build()

    def _record_visibility(self, params: dict[str, Any], **_: Any) -> None:
        self.visibility_changes.append((params["ReceiptHandle"], params["VisibilityTimeout"]))

    def _build(self) -> Services:
        services = bootstrap.aws_services(
            self.settings,
            finalize_later=self.finalize_requests.append,
            continue_start=self.start_requests.append,
            clock=self.clock,
        )
        bootstrap.install(services)
        return services

    @property
    def max_receive_count(self) -> int:
        return self.settings.max_receive_count

    def configure(self, **changes: Any) -> None:
        self.settings = self.settings.model_copy(update=changes)
        self.services = self._build()

    def spec(self, data: dict[str, Any]) -> CrawlSpec:
        return write_spec(self.specs_dir, data)

    def start(self, crawl: str) -> str:
        answer = scheduler.handler({"crawl": crawl}, context("scheduler"))
        self.finalize_shards()  # a start that closed a stopped or stale run queued its shard tasks
        assert answer["complete"] is True
        return str(answer["run_id"])

    def finalize_shards(self) -> list[dict[str, Any]]:
        """The finalize shard queue's event source mapping: deliver its tasks until none is left."""
        invoke = lambda event: finalizer.handler(event, context("finalizer"))  # noqa: E731
        return drain_shards(self.settings.finalize_queue_url, invoke)

    def receive(self, max_messages: int = 10) -> list[Message]:
        received = self.sqs.receive_message(
            QueueUrl=self.settings.queue_url,
            MaxNumberOfMessages=max_messages,
            MessageSystemAttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        return [
            Message(m["MessageId"], m["ReceiptHandle"], m["Body"], int(m["Attributes"]["ApproximateReceiveCount"]))
            for m in received
        ]

    def invoke(self, messages: Sequence[Message], time_left_s: float | None = None) -> set[str]:
        records = [
            sqs_record(
                {
                    "MessageId": m.id,
                    "ReceiptHandle": m.receipt,
                    "Body": m.body,
                    "Attributes": {"ApproximateReceiveCount": str(m.receives)},
                },
                self.settings.queue_url,
            )
            for m in messages
        ]
        answer = fetcher.handler({"Records": records}, context("fetcher", round(time_left_s or 120)))
        return {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}

    def ack(self, messages: Sequence[Message], failed: set[str] | None = None) -> None:
        done = [m for m in messages if m.id not in (failed or set())]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(
                QueueUrl=self.settings.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m.receipt} for i, m in enumerate(done[start : start + 10])],
            )

    def make_visible(self, messages: Sequence[Message]) -> None:
        for m in messages:
            self.sqs.change_message_visibility(
                QueueUrl=self.settings.queue_url, ReceiptHandle=m.receipt, VisibilityTimeout=0
            )

    def send_raw(self, *bodies: str) -> None:
        self.sqs.send_message_batch(
            QueueUrl=self.settings.queue_url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": b,
                    "MessageGroupId": "raw",
                    "MessageDeduplicationId": f"raw-{i}-{time.time()}",
                }
                for i, b in enumerate(bodies)
            ],
        )

    def in_queue(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.settings.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def dead_letters(self) -> list[str]:
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

    def finalize_one(self, request: dict[str, object]) -> list[dict[str, Any]]:
        finalized: list[dict[str, Any]] = finalizer.handler(request, context("finalizer"))["finalized"]
        return finalized + self.finalize_shards()

    def sweep(self) -> list[dict[str, Any]]:
        return self.finalize_one({})

    def close_container(self) -> None:
        fetcher.close_container()


class LocalHarness:
    """The pipeline on the local store: the steps the local runner calls, on SQLite and files."""

    kind = "local"

    def __init__(self, folder: Path) -> None:
        self.specs_dir = folder / "crawls"
        self.clock = ShiftedClock()
        self.store = LocalStore.open(folder / "state", urls_per_message=DEFAULT.urls_per_message, clock=self.clock)
        self.tuning = Tuning(
            max_receive_count=DEFAULT.max_receive_count,
            visibility_base_s=0.0,
            visibility_max_s=60.0,
            allow_loopback=True,
            finalize_shard_pages=FINALIZE_SHARD_PAGES,
        )
        self.finalize_requests: list[dict[str, object]] = []
        self.start_requests: list[dict[str, object]] = []
        self.visibility_changes: list[tuple[str, int]] = []
        self._threads = threading.local()
        self._real_return_after = self.store.queue.return_after
        self.store.queue.return_after = self._return_after  # type: ignore[method-assign]
        self.services = self._build()

    def _return_after(self, receipt: str, delay_s: int) -> None:
        self.visibility_changes.append((receipt, delay_s))
        self._real_return_after(receipt, delay_s)

    def _build(self) -> Services:
        return self.store.services(
            self.specs_dir,
            self.tuning,
            finalize_later=self.finalize_requests.append,
            continue_start=self.start_requests.append,
        )

    @property
    def max_receive_count(self) -> int:
        return self.tuning.max_receive_count

    def configure(self, **changes: Any) -> None:
        if "urls_per_message" in changes:
            self.store.queue.urls_per_message = changes.pop("urls_per_message")
        if "max_receive_count" in changes:
            self.store.queue.max_receive_count = changes["max_receive_count"]
        self.tuning = dataclasses.replace(self.tuning, **changes) if changes else self.tuning
        self.services = self._build()

    def spec(self, data: dict[str, Any]) -> CrawlSpec:
        return write_spec(self.specs_dir, data)

    def start(self, crawl: str) -> str:
        answer = start_run(StartEvent(crawl=crawl), self.services, time_left=lambda: math.inf)
        assert answer.complete is True
        return answer.run_id

    def receive(self, max_messages: int = 10) -> list[Message]:
        return [
            Message(r.message_id, r.receipt_handle, r.body, r.receive_count)
            for r in self.store.queue.receive(None, max_messages, 900)
        ]

    def _loop(self) -> tuple[asyncio.AbstractEventLoop, Container]:
        if not hasattr(self._threads, "state"):
            self._threads.state = (asyncio.new_event_loop(), Container(allow_loopback=True))
        state: tuple[asyncio.AbstractEventLoop, Container] = self._threads.state
        return state

    def invoke(self, messages: Sequence[Message], time_left_s: float | None = None) -> set[str]:
        loop, container = self._loop()
        queued = [QueuedMessage(m.id, m.receipt, m.body, m.receives) for m in messages]
        end = time.monotonic() + (time_left_s if time_left_s is not None else math.inf)
        results = loop.run_until_complete(
            visit_batch(queued, self.services, container, time_left=lambda: end - time.monotonic())
        )
        return {message_id for message_id, error in results.items() if error is not None}

    def ack(self, messages: Sequence[Message], failed: set[str] | None = None) -> None:
        self.store.queue.delete([m.receipt for m in messages if m.id not in (failed or set())])

    def make_visible(self, messages: Sequence[Message]) -> None:
        for m in messages:
            self._real_return_after(m.receipt, 0)

    def send_raw(self, *bodies: str) -> None:
        self.store.queue.send_messages("", [("raw", b) for b in bodies])

    def in_queue(self) -> int:
        depth = self.store.queue.depth(None)
        return depth.visible + depth.in_flight

    def dead_letters(self) -> list[str]:
        return [body for _, body in self.store.queue.dead_letters(None)]

    def finalize_shards(self) -> list[dict[str, Any]]:
        """Nothing queued: locally the shard tasks ran on the finalizer's thread pool."""
        return []

    def finalize_one(self, request: dict[str, object]) -> list[dict[str, Any]]:
        crawl, run_id = request.get("crawl"), request.get("run_id")
        if isinstance(crawl, str) and isinstance(run_id, str):
            done = finalize_run(crawl, run_id, self.services)
            results = [done] if done is not None else []
        else:
            results = sweep(self.services)
        return [
            {
                "crawl": r.crawl,
                "run_id": r.run_id,
                "summary_key": r.summary_key,
                "healthy": r.summary.healthy,
            }
            for r in results
        ]

    def sweep(self) -> list[dict[str, Any]]:
        return self.finalize_one({})

    def close_container(self) -> None:
        state = getattr(self._threads, "state", None)
        if state is None:
            return
        loop, container = state
        loop.run_until_complete(container.aclose())
        loop.close()
        del self._threads.state

    def close(self) -> None:
        self.close_container()
        self.store.close()


Pipeline = PipelineOn[Harness]
"""The ``pipeline`` fixture: either adapter set, so only what :class:`Harness` promises."""


def _fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "testing")  # restored after the test; fake_credentials() sets the real values
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@contextmanager
def aws_harness(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsHarness]:
    _fake_aws_env(monkeypatch)
    with mock_aws(), serialized_calls():
        fake_credentials()
        try:
            yield AwsHarness(folder / "crawls")
        finally:
            fetcher.close_container()
            bootstrap.reset()
            clients.reset()
            load_crawl.cache_clear()


@contextmanager
def local_harness(folder: Path) -> Iterator[LocalHarness]:
    harness = LocalHarness(folder)
    try:
        yield harness
    finally:
        harness.close()
        load_crawl.cache_clear()


@pytest.fixture(params=["aws", "local"])
def pipeline(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    """The pipeline on each adapter set in turn: moto and the real handlers, then SQLite and the steps."""
    if request.param == "aws":
        with aws_harness(tmp_path, monkeypatch) as aws:
            yield PipelineOn(aws)
    else:
        with local_harness(tmp_path) as local:
            yield PipelineOn(local)


@pytest.fixture
def aws_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PipelineOn[AwsHarness]]:
    """The pipeline on moto only: for what is about the AWS path itself (handlers, events, request counts)."""
    with aws_harness(tmp_path, monkeypatch) as aws:
        yield PipelineOn(aws)


@pytest.fixture
def local_pipeline(tmp_path: Path) -> Iterator[PipelineOn[LocalHarness]]:
    """The pipeline on the local store only: for what the local queue plays (its head window, in-flight quota)."""
    with local_harness(tmp_path) as local:
        yield PipelineOn(local)

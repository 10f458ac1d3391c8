"""``sluice run``: one crawl run through the real handlers on embedded AWS.

The runner plays the parts AWS plays in production: EventBridge (it invokes the scheduler),
the SQS event source mapping (workers receive batches, invoke the fetcher with a real SQS
event, delete what succeeded and leave the rest to come back after their visibility timeout,
the queue's redrive policy moving a message to the dead-letter queue after its maximum
receives), and Lambda's async invokes (fan-out continuations and the finalizer).
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

from aws_lambda_powertools.utilities.typing import LambdaContext
from infra.config import DEFAULT, FunctionSettings, StackConfig
from moto import mock_aws

from sluice.aws.clients import client
from sluice.aws.ledger import RunState
from sluice.handlers import fetcher, finalizer, runtime, scheduler
from sluice.observability import logger
from sluice.pipeline.finalize import finalize_run
from sluice.pipeline.services import Services
from sluice.spec import CrawlSpec
from sluice_tools.emulate import state
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.resources import create_resources, dlq_url, fake_credentials, serialized_calls

RUN_TIME_LIMIT_S = 3600.0
"""A local run that has not drained in an hour is stopped and finalized as unfinished."""

Progress = Callable[[RunState], None]


@dataclass
class _Triggers:
    """Lambda's async invokes, queued for the runner's main loop."""

    finalize: deque[dict[str, object]] = field(default_factory=deque)
    start: deque[dict[str, object]] = field(default_factory=deque)


@dataclass
class LocalRun:
    """What a local run produced."""

    crawl: str
    run_id: str
    summary: dict[str, Any]
    dead_letters: list[dict[str, Any]]
    outputs: dict[str, str]


class LocalRunner:
    """Runs crawls of the specs in one folder against moto, with state kept in ``state_dir``."""

    def __init__(
        self,
        specs_dir: Path,
        state_dir: Path,
        *,
        workers: int = 4,
        allow_loopback: bool = False,
        config: StackConfig = DEFAULT,
    ) -> None:
        self.specs_dir = specs_dir
        self.state_dir = state_dir
        self.workers = workers
        self.allow_loopback = allow_loopback
        self.config = config

    def run(self, spec: CrawlSpec, progress: Progress | None = None) -> LocalRun:
        """Run ``spec`` once; the functions' JSON logs and EMF metrics go to ``state_dir/logs/``."""
        logs = self.state_dir / "logs" / f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
        logs.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(self.state_dir), logs.open("a", encoding="utf-8") as sink, _logs_to(sink):
            result = self._run_on_moto(spec, progress)
        named = logs.with_name(f"{spec.name}-{result.run_id}.jsonl")  # the run id is known only now
        logs.replace(named)
        result.outputs["logs"] = str(named)
        return result

    def _run_on_moto(self, spec: CrawlSpec, progress: Progress | None) -> LocalRun:
        with mock_aws(), serialized_calls():
            fake_credentials()
            settings = create_resources(self.config, self.specs_dir, allow_loopback=self.allow_loopback)
            state.load(settings, self.state_dir)
            triggers = _Triggers()
            services = Services.build(
                settings, finalize_later=triggers.finalize.append, continue_start=triggers.start.append
            )
            runtime.install(services)
            try:
                self._close_interrupted(services, spec.name)
                result = self._run(spec, services, triggers, progress)
            finally:
                runtime.reset()
                state.save(settings, self.state_dir)
        return result

    def _close_interrupted(self, services: Services, crawl: str) -> None:
        """A lock left by an interrupted local run: that run can never finish, so finalize it as unfinished."""
        lock = services.ledger.active_run(crawl)
        if lock is not None:
            finalize_run(crawl, lock["run_id"], services, force=True)

    def _run(self, spec: CrawlSpec, services: Services, triggers: _Triggers, progress: Progress | None) -> LocalRun:
        answer = scheduler.handler({"crawl": spec.name}, self._context(self.config.scheduler))
        run_id = str(answer["run_id"])
        self._drain(services, triggers, spec.name, run_id, progress)
        run = services.ledger.get_run(spec.name, run_id)
        if run is not None and run.status == "running":
            # Nothing left in the queue yet URLs pending: they went to the dead-letter queue.
            finalize_run(spec.name, run_id, services, force=True)
        summary_key = services.objects.summary_key(spec.name, run_id)
        summary = json.loads(client("s3").get_object(Bucket=services.settings.bucket, Key=summary_key)["Body"].read())
        dead = self._dead_letters()
        summary["dead_letters"] = len(dead)
        outputs = {
            "records": str(state.object_path(self.state_dir, services.objects.records_key(spec.name, run_id))),
            "summary": str(state.object_path(self.state_dir, summary_key)),
        }
        return LocalRun(spec.name, run_id, summary, dead, outputs)

    def _context(self, function: FunctionSettings) -> LambdaContext:
        name = self.config.name(function.handler.split(".")[-2])
        return cast(LambdaContext, LocalContext(function_name=name, timeout_s=function.timeout_s))

    def _drain(
        self, services: Services, triggers: _Triggers, crawl: str, run_id: str, progress: Progress | None
    ) -> None:
        stop = threading.Event()
        busy = [0]
        lock = threading.Lock()
        errors: list[BaseException] = []
        workers = [
            threading.Thread(target=self._work, args=(services, stop, busy, lock, errors), daemon=True)
            for _ in range(self.workers)
        ]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + RUN_TIME_LIMIT_S
        try:
            while time.monotonic() < deadline and not errors:
                while triggers.start:
                    scheduler.handler(triggers.start.popleft(), self._context(self.config.scheduler))
                while triggers.finalize:
                    finalizer.handler(triggers.finalize.popleft(), self._context(self.config.finalizer))
                run = services.ledger.get_run(crawl, run_id)
                if progress is not None and run is not None:
                    progress(run)
                if run is None or run.status != "running":
                    break
                with lock:
                    idle = busy[0] == 0
                if idle and not triggers.finalize and self._queue_empty(services):
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for worker in workers:
                worker.join(timeout=60)
        if errors:
            raise errors[0]

    def _queue_empty(self, services: Services) -> bool:
        attributes = client("sqs").get_queue_attributes(
            QueueUrl=services.settings.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])
            == 0
        )

    def _work(
        self,
        services: Services,
        stop: threading.Event,
        busy: list[int],
        lock: threading.Lock,
        errors: list[BaseException],
    ) -> None:
        """One stand-in for a fetcher container fed by the event source mapping."""
        sqs = client("sqs")
        queue_url = services.settings.queue_url
        try:
            while not stop.is_set():
                with lock:
                    busy[0] += 1
                try:
                    received = sqs.receive_message(
                        QueueUrl=queue_url,
                        MaxNumberOfMessages=self.config.batch_size,
                        MessageSystemAttributeNames=["All"],
                        WaitTimeSeconds=0,
                    ).get("Messages", [])
                    if received:
                        self._invoke_fetcher(sqs, queue_url, received)
                finally:
                    with lock:
                        busy[0] -= 1
                if not received:
                    stop.wait(0.05)
        except BaseException as exc:
            errors.append(exc)
        finally:
            fetcher.close_container()

    def _invoke_fetcher(self, sqs: Any, queue_url: str, received: list[dict[str, Any]]) -> None:
        event = {"Records": [sqs_record(m, queue_url) for m in received]}
        answer = fetcher.handler(event, self._context(self.config.fetcher))
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        done = [m for m in received if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
                ],
            )

    def _dead_letters(self) -> list[dict[str, Any]]:
        """What reached the dead-letter queue during this run (left there, as in AWS, for a redrive)."""
        sqs = client("sqs")
        url = dlq_url(self.config)
        seen: dict[str, dict[str, Any]] = {}
        for _ in range(100):
            batch = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            if not batch:
                break
            for message in batch:
                seen[message["MessageId"]] = {"message_id": message["MessageId"], "body": message["Body"][:500]}
        return list(seen.values())


class StateInUse(RuntimeError):
    """Another local run holds the state folder: two runs on one folder would overwrite each other's state."""


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """Hold the state folder's lock for the whole run, or refuse at once."""
    with (folder / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateInUse(f"another sluice run is using {folder}/ (pass a different --state)") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _logs_to(sink: TextIO) -> Iterator[None]:
    """Send the functions' log lines (Powertools Logger) and EMF documents (printed) to ``sink``."""
    handler = logger.registered_handler
    if not isinstance(handler, logging.StreamHandler):
        raise TypeError(f"expected Powertools' stream handler, got {handler!r}")
    previous = handler.stream
    handler.setStream(sink)
    try:
        with redirect_stdout(sink):
            yield
    finally:
        handler.setStream(previous)


def sqs_record(message: dict[str, Any], queue_url: str) -> dict[str, Any]:
    """An SQS message as the event source mapping hands it to Lambda."""
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", "local"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp", "0"),
        },
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue_url.rsplit('/', 1)[-1]}",
        "awsRegion": "us-east-1",
    }

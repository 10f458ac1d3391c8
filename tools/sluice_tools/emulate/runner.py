"""``sluice run --emulate-aws``: one crawl run through the real Lambda handlers on embedded AWS (moto).

The runner plays the parts AWS plays in production: EventBridge (it invokes the scheduler),
the SQS event source mapping (worker threads receive batches, invoke the fetcher with a real
SQS event, delete what succeeded and leave the rest to come back after their visibility
timeout, the queue's redrive policy moving a message to the dead-letter queue after its
maximum receives), and Lambda's async invokes (fan-out continuations and the finalizer).
Slower than the local store (moto is an in-process emulator) and not resumable: moto's state
is saved to the folder when a run ends. It exists so the AWS path stays runnable on demand.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext
from infra.config import DEFAULT, FunctionSettings, StackConfig
from moto import mock_aws

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.shardtasks import SqsShardTasks
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.layout import manifest_key, records_prefix, summary_key
from sluice.domain.summary import RunSummary
from sluice.handlers import bootstrap, fetcher, finalizer, scheduler
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.services import Services
from sluice.pipeline.start.seedfile import upload_seed_file
from sluice.spec import CrawlSpec
from sluice_tools.emulate import state
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.deadline import LambdaTimedOut, call_with_deadline
from sluice_tools.emulate.events import sqs_record
from sluice_tools.emulate.resources import create_resources, dlq_url, fake_credentials, serialized_calls
from sluice_tools.emulate.shards import drain_shards
from sluice_tools.runner.secrets import copy_to_moto, local_credentials
from sluice_tools.runner.session import LocalRun, Progress, RunView, exclusive, logs_to

RUN_TIME_LIMIT_S = 3600.0
"""An emulated run that has not drained in an hour is stopped and finalized as unfinished."""


@dataclass
class _Triggers:
    """Lambda's async invokes, queued for the runner's main loop."""

    finalize: deque[dict[str, object]] = field(default_factory=deque)
    start: deque[dict[str, object]] = field(default_factory=deque)


class EmulatedRunner:
    """Runs crawls of the specs in one folder against moto, with moto's state kept in ``state_dir``."""

    def __init__(
        self,
        specs_dir: Path,
        state_dir: Path,
        *,
        workers: int = 4,
        allow_loopback: bool = False,
        config: StackConfig = DEFAULT,
        clock: Clock = SYSTEM_CLOCK,
        lambda_timeouts: bool = False,
    ) -> None:
        self.specs_dir, self.state_dir, self.workers = specs_dir, state_dir, max(1, workers)
        self.allow_loopback, self.config = allow_loopback, config
        self.clock = clock
        """The pipeline's time (a bench or test plays nights a day apart with its own)."""
        self.lambda_timeouts = lambda_timeouts
        """Stop a fetcher invocation at the fetcher's configured timeout, as Lambda does (and give the queue the
        stack's visibility timeout, 6 x that, so its batch comes back when it would on AWS)."""
        self.timed_out = 0
        """Fetcher invocations stopped at their deadline."""

    def run(self, spec: CrawlSpec, progress: Progress | None = None) -> LocalRun:
        """Run ``spec`` once; the functions' JSON logs and EMF metrics go to ``state_dir/logs/``.

        The secrets the spec names are read from the environment, as ``sluice run`` reads them, and
        stored in moto's Secrets Manager and SSM, where the handlers read them as deployed."""
        local_credentials(spec)  # refused before moto starts when one is missing
        logs = self.state_dir / "logs" / f"{spec.name}-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
        logs.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(self.state_dir), logs.open("a", encoding="utf-8") as sink, logs_to(sink):
            result = self._run_on_moto(spec, progress)
        named = logs.with_name(f"{spec.name}-{result.run_id}.jsonl")  # the run id is known only now
        logs.replace(named)
        result.outputs["logs"] = str(named)
        if progress is not None:
            progress(RunView.final(result.summary))
        return result

    def _run_on_moto(self, spec: CrawlSpec, progress: Progress | None) -> LocalRun:
        with mock_aws(), serialized_calls():
            fake_credentials()
            settings = create_resources(self.config, self.specs_dir, allow_loopback=self.allow_loopback)
            if self.lambda_timeouts:
                client("sqs").set_queue_attributes(
                    QueueUrl=settings.queue_url, Attributes={"VisibilityTimeout": str(self.config.visibility_timeout_s)}
                )
            state.load(settings, self.state_dir)
            copy_to_moto(spec)
            triggers = _Triggers()
            services = bootstrap.aws_services(
                settings,
                finalize_later=triggers.finalize.append,
                continue_start=triggers.start.append,
                clock=self.clock,
            )
            bootstrap.install(services)
            try:
                self._close_interrupted(services, spec.name)
                result = self._run(spec, services, triggers, progress)
            finally:
                bootstrap.reset()
                state.save(settings, self.state_dir)
        return result

    def _close_interrupted(self, services: Services, crawl: str) -> None:
        """A lock left by an interrupted emulated run: that run can never finish, so finalize it as unfinished."""
        lock = services.ledger.active_run(crawl)
        if lock is not None:
            finalize_run(crawl, lock.run_id, services, force=True)
            self._finalize_shards(services)

    def _run(self, spec: CrawlSpec, services: Services, triggers: _Triggers, progress: Progress | None) -> LocalRun:
        upload_seed_file(services.objects, spec, self.specs_dir)
        answer = scheduler.handler({"crawl": spec.name}, self._context(self.config.scheduler))
        self._finalize_shards(services)  # a start that closed a stale run or a failed start finalized it
        run_id = str(answer["run_id"])
        if not answer.get("failed"):  # a failed start closed its run: its summary says why
            self._drain(services, triggers, spec.name, run_id, progress)
        run = services.ledger.get_run(spec.name, run_id)
        if run is not None and run.status != "finished":
            # Nothing left in the queue yet URLs pending: they went to the dead-letter queue.
            finalize_run(spec.name, run_id, services, force=True)
            self._finalize_shards(services)
        key = summary_key(spec.name, run_id)
        raw = services.objects.get(key)
        if raw is None:
            raise RuntimeError(f"run {run_id} ended without a summary at {key}")
        summary = RunSummary.from_bytes(raw)
        dead = self._dead_letters()
        outputs = {
            "records": str(state.object_path(self.state_dir, records_prefix(spec.name, run_id))),
            "manifest": str(state.object_path(self.state_dir, manifest_key(spec.name, run_id))),
            "summary": str(state.object_path(self.state_dir, key)),
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
                    self._finalize_shards(services)
                run = services.ledger.get_run(crawl, run_id)
                if progress is not None and run is not None:
                    p = services.frontier.progress(run_id)
                    progress(RunView(p.done, run.seeds + p.claimed, p.records, p.failed))
                if run is None or run.status != "running":
                    break
                with lock:
                    idle = busy[0] == 0
                if idle and not triggers.finalize and self._queue_empty(services):
                    finalizer.handler({"crawl": crawl, "run_id": run_id}, self._context(self.config.finalizer))
                    self._finalize_shards(services)
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for worker in workers:
                worker.join(timeout=60)
        if errors:
            raise errors[0]

    def _finalize_shards(self, services: Services) -> None:
        """The finalize shard queue's event source mapping: its tasks delivered to the finalizer until none is left."""
        tasks = services.finalize_shards
        if isinstance(tasks, SqsShardTasks):
            drain_shards(tasks.queue_url, lambda event: finalizer.handler(event, self._context(self.config.finalizer)))

    def _queue_empty(self, services: Services) -> bool:
        attributes = client("sqs").get_queue_attributes(
            QueueUrl=self._queue_url(services),
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])
            == 0
        )

    @staticmethod
    def _queue_url(services: Services) -> str:
        url: str = getattr(services.queue, "queue_url")  # noqa: B009 - the SQS adapter's, by name
        return url

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
        queue_url = self._queue_url(services)
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
        context = self._context(self.config.fetcher)
        if self.lambda_timeouts:
            try:
                loop = fetcher._container()[0]  # this thread's container: its loop is woken at the deadline
                timeout = self.config.fetcher.timeout_s
                answer = call_with_deadline(lambda: fetcher.handler(event, context), timeout, loop)
            except LambdaTimedOut:
                self.timed_out += 1
                _drop_container()  # Lambda starts the runtime afresh; the batch comes back after its visibility
                return
        else:
            answer = fetcher.handler(event, context)
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


def _drop_container() -> None:
    """Forget this thread's fetcher container after a stop: its tasks cancelled (a stopped invocation writes
    nothing more), its pools closed."""
    state = getattr(fetcher._containers, "state", None)
    if state is None:
        return
    del fetcher._containers.state
    loop, container = state
    try:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(container.aclose())
    finally:
        loop.close()

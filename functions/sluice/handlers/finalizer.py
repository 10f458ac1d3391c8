"""Finalizer Lambda: judge a finished run (or sweep every open run that is done or overdue, and judge each
scheduled crawl for a missing run), and run the finalize shard tasks its queue delivers (an SQS event),
answered with partial batch failures."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice.collector import collect_rarely_from_now
from sluice.handlers.bootstrap import services
from sluice.messages import FinalizeEvent, ShardTask, parse_body
from sluice.observability import annotate, logger, traced_handler
from sluice.pipeline.finalize.columnar import copy_finished, sweep_copies
from sluice.pipeline.finalize.driver import Finalized, finalize_run, queued_shard, sweep
from sluice.pipeline.finalize.schedules import check_schedules, emit_missing_runs

collect_rarely_from_now()  # the one deliberate import-time action: after the imports (sluice.collector)


@logger.inject_lambda_context(clear_state=True)
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        return _shard_tasks(event, context)
    # A scheduled sweep arrives as an EventBridge event with its own fields; only our keys matter.
    request = parse_body(FinalizeEvent, event if "crawl" in event or "run_id" in event else {})
    if request.crawl and request.run_id:
        logger.append_keys(crawl=request.crawl, run_id=request.run_id)
        annotate(crawl=request.crawl, run_id=request.run_id)
        done = finalize_run(request.crawl, request.run_id, services())
        results = [done] if done else []
        copy_finished(services(), results)  # after the verdicts, never before: they do not wait for it
    else:
        results = sweep(services())
        copy_finished(services(), results)
        sweep_copies(services())  # recent runs' copies: how they ended, or started if they never were
        checks = check_schedules(services())
        emit_missing_runs(checks)
        return {"finalized": [_answer(r) for r in results], "missing_runs": [c.crawl for c in checks if c.missing]}
    return {"finalized": [_answer(r) for r in results]}


def _shard_tasks(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    finalized: list[Finalized] = []
    last_receive = services().tuning.max_receive_count

    def run(record: SQSRecord) -> None:
        task = parse_body(ShardTask, record.body)
        logger.append_keys(crawl=task.crawl, run_id=task.run_id)
        annotate(crawl=task.crawl, run_id=task.run_id)
        receives = int(record.attributes.approximate_receive_count or 1)
        done = queued_shard(services(), task, last_try=receives >= last_receive)
        if done is not None:
            finalized.append(done)

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = dict(process_partial_response(event=event, record_handler=run, processor=processor, context=context))
    copy_finished(services(), finalized)
    return response | {"finalized": [_answer(r) for r in finalized]}


def _answer(result: Finalized) -> dict[str, Any]:
    return {
        "crawl": result.crawl,
        "run_id": result.run_id,
        "summary_key": result.summary_key,
        "healthy": result.summary.healthy,
    }

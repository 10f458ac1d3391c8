"""Scheduler Lambda: an EventBridge schedule (or ``sluice start``) names a crawl; open a run and fan out its seeds."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice.collector import collect_rarely_from_now
from sluice.handlers.bootstrap import services
from sluice.messages import StartEvent, parse_body
from sluice.observability import annotate, logger, traced_handler
from sluice.pipeline.start.fanout import StartFailed, start_run

collect_rarely_from_now()  # the one deliberate import-time action: after the imports (sluice.collector)

SAFETY_MARGIN_MS = 60_000


@logger.inject_lambda_context(clear_state=True)
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    start = parse_body(StartEvent, event)
    logger.append_keys(crawl=start.crawl)
    annotate(crawl=start.crawl)
    try:
        result = start_run(
            start, services(), time_left=lambda: (context.get_remaining_time_in_millis() - SAFETY_MARGIN_MS) / 1000
        )
    except StartFailed as exc:
        # Answered, not raised: a retry would open another run only to fail the same way. The closed
        # run's summary and verdict say what happened, and its alarms fire.
        annotate(run_id=exc.run_id)
        return {"crawl": start.crawl, "run_id": exc.run_id, "failed": str(exc)}
    annotate(run_id=result.run_id)
    return asdict(result)

"""Finalizer Lambda: judge a finished run (or sweep every open run that is done or overdue)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice.handlers.bootstrap import services
from sluice.messages import FinalizeEvent, parse_body
from sluice.observability import annotate, logger, traced_handler
from sluice.pipeline.finalize import finalize_run, sweep


@logger.inject_lambda_context(clear_state=True)
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # A scheduled sweep arrives as an EventBridge event with its own fields; only our keys matter.
    request = parse_body(FinalizeEvent, event if "crawl" in event or "run_id" in event else {})
    if request.crawl and request.run_id:
        logger.append_keys(crawl=request.crawl, run_id=request.run_id)
        annotate(crawl=request.crawl, run_id=request.run_id)
        done = finalize_run(request.crawl, request.run_id, services())
        results = [done] if done else []
    else:
        results = sweep(services())
    return {
        "finalized": [
            {
                "crawl": r.crawl,
                "run_id": r.run_id,
                "summary_key": r.summary_key,
                "healthy": r.summary["verdict"]["healthy"],
            }
            for r in results
        ]
    }

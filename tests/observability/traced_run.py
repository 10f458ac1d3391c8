"""A demo crawl through the three handlers on moto, run as Lambda runs them (tracing on); for test_tracing.py.

    python traced_run.py SPECS_DIR   (the environment says where the X-Ray daemon listens)

Run in a process of its own: the tracer decides at import whether it is in Lambda.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

from aws_lambda_powertools.utilities.typing import LambdaContext
from infra.config import DEFAULT
from moto import mock_aws

from sluice.adapters.aws.clients import client
from sluice.handlers import bootstrap, fetcher, finalizer, scheduler
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.events import sqs_record
from sluice_tools.emulate.resources import create_resources, fake_credentials

MAX_BATCHES = 50


def context(function: str) -> LambdaContext:
    return cast(LambdaContext, LocalContext(function_name=DEFAULT.name(function), timeout_s=120))


def main(specs: Path) -> None:
    with mock_aws():
        fake_credentials()
        settings = create_resources(DEFAULT, specs, allow_loopback=True)
        finalize: list[dict[str, Any]] = []
        bootstrap.install(
            bootstrap.aws_services(settings, finalize_later=finalize.append, continue_start=lambda _: None)
        )
        started = scheduler.handler({"crawl": "traced"}, context("scheduler"))
        sqs = client("sqs")
        for _ in range(MAX_BATCHES):
            got = sqs.receive_message(
                QueueUrl=settings.queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                break
            fetcher.handler({"Records": [sqs_record(m, settings.queue_url) for m in got]}, context("fetcher"))
            sqs.delete_message_batch(
                QueueUrl=settings.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
            )
        for request in finalize[:1]:
            finalizer.handler(request, context("finalizer"))
        fetcher.close_container()
        print(json.dumps({"run_id": started["run_id"]}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""The AWS wiring, in one place: settings validated at cold start, the aws adapters behind the ports, async triggers.

Handlers ask :func:`services` for what they need; tests and the emulated runner :func:`install`
their own (moto-backed adapters, in-process triggers) instead of reading the environment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.hosts import DynamoHostBook
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.adapters.aws.objects import S3Objects
from sluice.adapters.aws.queue import SqsQueue
from sluice.adapters.aws.records import DynamoRecords
from sluice.adapters.aws.secrets import AwsSecrets
from sluice.adapters.aws.shardtasks import SqsShardTasks
from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.pipeline.services import Services, Trigger
from sluice.settings import Settings

if TYPE_CHECKING:
    from sluice.pipeline.finalize.columnar import ParquetCopy

_installed: list[Services] = []


def _invoke_async(function: str) -> Callable[[dict[str, object]], None]:
    def invoke(payload: dict[str, object]) -> None:
        client("lambda").invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode())

    return invoke


def _parquet_copy(settings: Settings) -> ParquetCopy | None:
    """The finalizer's Parquet copy, when the settings name its workgroup; imported only then (the fetcher
    and the scheduler have none, and their cold start does not load Athena's adapter)."""
    if not (settings.workgroup and settings.glue_database):
        return None
    from sluice.adapters.aws.athena import AthenaQueries
    from sluice.pipeline.finalize.columnar import ParquetCopy

    return ParquetCopy(AthenaQueries(settings.workgroup, settings.glue_database), settings.bucket)


def aws_services(
    settings: Settings, *, finalize_later: Trigger, continue_start: Trigger, clock: Clock = SYSTEM_CLOCK
) -> Services:
    """The pipeline's ports on DynamoDB, S3 and SQS, as the settings name them; secrets from Secrets Manager and SSM.

    ``clock`` is the real one in Lambda; the emulated runner and tests pass their own to play nights a day apart.
    Every adapter that stamps or expires something is built with it, and the steps read it from the services."""
    return Services(
        tuning=settings.tuning(),
        ledger=DynamoRunLedger(settings.ledger_table, clock=clock),
        frontier=DynamoFrontier(settings.ledger_table, ttl_days=settings.claim_ttl_days, clock=clock),
        hosts=DynamoHostBook(settings.ledger_table, ttl_days=settings.claim_ttl_days, clock=clock),
        queue=SqsQueue(settings.queue_url, urls_per_message=settings.urls_per_message),
        objects=S3Objects(settings.bucket),
        records=DynamoRecords(settings.records_table) if settings.records_table else None,
        secrets=AwsSecrets(),
        finalize_shards=(
            SqsShardTasks(
                settings.finalize_queue_url, settings.ledger_table, ttl_days=settings.claim_ttl_days, clock=clock
            )
            if settings.finalize_queue_url
            else None
        ),
        parquet=_parquet_copy(settings),
        specs_dir=settings.specs_dir,
        finalize_later=finalize_later,
        continue_start=continue_start,
        clock=clock,
    )


@lru_cache(maxsize=1)
def _from_env() -> Services:
    settings = Settings.from_env()
    return aws_services(
        settings,
        finalize_later=_invoke_async(settings.finalizer_function),
        continue_start=_invoke_async(settings.scheduler_function),
    )


def services() -> Services:
    """Built on the first invocation (cold start) and reused; a bad environment fails loudly here."""
    return _installed[-1] if _installed else _from_env()


def install(custom: Services) -> None:
    """Use ``custom`` instead of the environment's services (the emulated runner's in-process triggers, tests)."""
    _installed.clear()
    _installed.append(custom)


def reset() -> None:
    """Forget installed and cached services (tests, after moto restarts)."""
    _installed.clear()
    _from_env.cache_clear()

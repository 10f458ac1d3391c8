"""AWS clients, created once per process and reused (tests clear the cache after starting moto).

botocore directly, not boto3: boto3's import pulls in s3transfer, which the functions never use
and a cold start would pay for.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from botocore.config import Config
from botocore.session import get_session

# Adaptive retries absorb DynamoDB and SQS throttling; the pool fits the fetcher's write fan-out.
_CONFIG = Config(retries={"max_attempts": 8, "mode": "adaptive"}, max_pool_connections=64)


@cache
def client(service: str, region: str | None = None) -> Any:
    """The process-wide client for ``service``."""
    return get_session().create_client(service, region_name=region, config=_CONFIG)


def reset() -> None:
    """Forget every client (after moto starts, or when credentials change)."""
    client.cache_clear()

"""What every handler shares in Lambda: settings validated at cold start, services built once, async triggers."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache

from sluice.aws.clients import client
from sluice.pipeline.services import Services
from sluice.settings import Settings

_installed: list[Services] = []


def _invoke_async(function: str) -> Callable[[dict[str, object]], None]:
    def invoke(payload: dict[str, object]) -> None:
        client("lambda").invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode())

    return invoke


@lru_cache(maxsize=1)
def _from_env() -> Services:
    settings = Settings.from_env()
    return Services.build(
        settings,
        finalize_later=_invoke_async(settings.finalizer_function),
        continue_start=_invoke_async(settings.scheduler_function),
    )


def services() -> Services:
    """Built on the first invocation (cold start) and reused; a bad environment fails loudly here."""
    return _installed[-1] if _installed else _from_env()


def install(custom: Services) -> None:
    """Use ``custom`` instead of the environment's services (the local runner's in-process triggers)."""
    _installed.clear()
    _installed.append(custom)


def reset() -> None:
    """Forget installed and cached services (tests, after moto restarts)."""
    _installed.clear()
    _from_env.cache_clear()

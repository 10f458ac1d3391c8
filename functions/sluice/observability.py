"""Logger, Metrics and Tracer, created once: every log line is one JSON object carrying crawl, run id and URL.

Tracing (X-Ray, through Powertools) is on in Lambda only: each handler is a subsegment annotated
with its crawl and run, every AWS call one below it (botocore is the one module patched: page
fetches are not traced, a batch has hundreds), and :func:`traced` marks a step's phases. Outside
Lambda (the local runner, tests) there is no tracer at all.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics, Tracer

from sluice.metrics import CRAWL_DIMENSION, NAMESPACE

logger = Logger(service="sluice")
# No service name: Powertools would add it as a dimension, and the alarms watch exactly {crawl}.
metrics = Metrics(namespace=NAMESPACE)
# Only in Lambda: outside it the X-Ray SDK, even disabled, builds a sampling client at import
# (about 200 ms measured), which the local runner and the CLI have no use for.
tracer: Tracer | None = Tracer(service="sluice", patch_modules=["botocore"]) if os.getenv("LAMBDA_TASK_ROOT") else None

F = TypeVar("F", bound=Callable[..., Any])


def traced_handler(handler: F) -> F:
    """A Lambda handler as a ``## handler`` subsegment (its response is not recorded)."""
    if tracer is None or tracer.disabled:
        return handler
    return cast(F, tracer.capture_lambda_handler(handler, capture_response=False))


def annotate(**annotations: str | int) -> None:
    """Annotate the current (sub)segment: X-Ray finds traces by annotation (``annotation.run_id = "..."``)."""
    if tracer is None or tracer.disabled:
        return
    for key, value in annotations.items():
        tracer.put_annotation(key, _value(value))


@contextmanager
def traced(name: str, **annotations: str | int) -> Iterator[None]:
    """A subsegment for one phase of a step (``## write batch``), when tracing is on."""
    if tracer is None or tracer.disabled:
        yield
        return
    with tracer.provider.in_subsegment(f"## {name}") as subsegment:
        for key, value in annotations.items():
            subsegment.put_annotation(key, _value(value))
        yield


def _value(value: str | int) -> str | numbers.Number:
    return value if isinstance(value, str) else cast(numbers.Number, value)  # typeshed: int is no Number


__all__ = ["CRAWL_DIMENSION", "annotate", "logger", "metrics", "traced", "traced_handler", "tracer"]

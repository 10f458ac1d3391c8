"""Logger, Metrics and Tracer, created once: every log line is one JSON object carrying crawl, run id and URL.

Tracing (X-Ray, through Powertools) is on in Lambda only: each handler is a subsegment annotated
with its crawl and run, every AWS call one below it (botocore is the one module patched: page
fetches are not traced, a batch has hundreds), and :func:`traced` marks a step's phases. Outside
Lambda (the local runner, tests) the tracer is off and costs nothing.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from aws_lambda_powertools import Logger, Metrics, Tracer

from sluice.metrics import CRAWL_DIMENSION, NAMESPACE

logger = Logger(service="sluice")
# No service name: Powertools would add it as a dimension, and the alarms watch exactly {crawl}.
metrics = Metrics(namespace=NAMESPACE)
tracer = Tracer(service="sluice", patch_modules=["botocore"])


def annotate(**annotations: str | int) -> None:
    """Annotate the current (sub)segment: X-Ray finds traces by annotation (``annotation.run_id = "..."``)."""
    if tracer.disabled:
        return
    for key, value in annotations.items():
        tracer.put_annotation(key, _value(value))


@contextmanager
def traced(name: str, **annotations: str | int) -> Iterator[None]:
    """A subsegment for one phase of a step (``## write batch``), when tracing is on."""
    if tracer.disabled:
        yield
        return
    with tracer.provider.in_subsegment(f"## {name}") as subsegment:
        for key, value in annotations.items():
            subsegment.put_annotation(key, _value(value))
        yield


def _value(value: str | int) -> str | numbers.Number:
    return value if isinstance(value, str) else cast(numbers.Number, value)  # typeshed: int is no Number


__all__ = ["CRAWL_DIMENSION", "annotate", "logger", "metrics", "traced", "tracer"]

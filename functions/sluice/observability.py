"""Logger and Metrics, created once: every log line is one JSON object carrying crawl, run id and URL."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

from sluice.metrics import CRAWL_DIMENSION, NAMESPACE

logger = Logger(service="sluice")
# No service name: Powertools would add it as a dimension, and the alarms watch exactly {crawl}.
metrics = Metrics(namespace=NAMESPACE)

__all__ = ["CRAWL_DIMENSION", "logger", "metrics"]

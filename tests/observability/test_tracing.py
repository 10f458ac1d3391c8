"""Tracing as X-Ray receives it: a demo crawl through the three handlers, in Lambda's environment, its
subsegments caught by a UDP listener on 127.0.0.1 standing where the X-Ray daemon listens."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice_tools.demosite import RunningDemoSite, running_demo_site

ROOT = Path(__file__).resolve().parents[2]
TRACE_ID = "1-5759e988-bd862e3fe1be46a994272793"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def daemon() -> Iterator[socket.socket]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.2)
    try:
        yield listener
    finally:
        listener.close()


def _documents(listener: socket.socket) -> list[dict[str, Any]]:
    """Every segment document received (each datagram: a JSON header line, then the document)."""
    found = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            datagram = listener.recv(65536)
        except TimeoutError:
            break
        _, _, body = datagram.decode().partition("\n")
        found.append(json.loads(body))
    return found


Traced = tuple[str, list[dict[str, Any]]]


def _run(tmp_path: Path, site: RunningDemoSite, listener: socket.socket, **env: str) -> Traced:
    specs = tmp_path / "crawls"
    specs.mkdir(exist_ok=True)
    spec = {
        "name": "traced",
        "seeds": {"template": f"{site.base_url}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": 2}},
        "extract": {"item": "article.product_pod", "fields": {"title": "h3 a::attr(title)"}},
    }
    (specs / "traced.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    port = listener.getsockname()[1]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools", ".")),
        "LAMBDA_TASK_ROOT": str(tmp_path),  # what Lambda sets: the tracer is on
        "AWS_LAMBDA_FUNCTION_NAME": "sluice-dev-fetcher",
        "_X_AMZN_TRACE_ID": f"Root={TRACE_ID};Parent=53995c3f42cd8ad8;Sampled=1",
        "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{port}",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "POWERTOOLS_METRICS_NAMESPACE": "Sluice",
        **env,
    }
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this folder
        [sys.executable, str(Path(__file__).with_name("traced_run.py")), str(specs)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    run_id = json.loads(answer.stdout.strip().splitlines()[-1])["run_id"]
    return run_id, _documents(listener)


def test_each_handler_and_aws_call_is_a_subsegment_annotated_with_crawl_and_run(
    tmp_path: Path, daemon: socket.socket
) -> None:
    with running_demo_site(books=40) as site:
        run_id, documents = _run(tmp_path, site, daemon)
    handlers = [d for d in documents if d["name"] == "## handler"]
    assert len(handlers) >= 3  # scheduler, at least one fetcher batch, finalizer
    for segment in handlers:
        assert segment["trace_id"] == TRACE_ID
        assert segment["annotations"]["crawl"] == "traced"
        assert segment["annotations"]["run_id"] == run_id
    names = {d["name"] for d in documents}
    assert {"## fetch pages", "## write batch"} <= names  # a fetcher batch's phases
    aws = {(d.get("namespace"), d["name"]) for d in documents if d.get("namespace") == "aws"}
    assert {("aws", "dynamodb"), ("aws", "s3"), ("aws", "sqs")} <= aws  # every adapter's calls
    assert not any(d["name"].startswith("127.0.0.1") for d in documents)  # page fetches are not traced


def test_tracing_is_off_outside_lambda(tmp_path: Path, daemon: socket.socket) -> None:
    with running_demo_site(books=40) as site:
        _, documents = _run(tmp_path, site, daemon, LAMBDA_TASK_ROOT="")
    assert documents == []

"""Fixtures for the operating commands: real local runs of the demo crawl, and the stack's resources on moto."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from infra.config import DEFAULT
from moto import mock_aws

from sluice.adapters.aws import clients
from sluice.observability import logger
from sluice.pipeline.services import load_crawl
from sluice.settings import Settings
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate.resources import create_resources, fake_credentials

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPEC = ROOT / "crawls" / "demo-books.yaml"
DEMO_PORT = "127.0.0.1:8710"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/ops" in str(item.path):
            item.add_marker(pytest.mark.timeout(90))


@pytest.fixture(autouse=True)
def pipeline_logs() -> Iterator[io.StringIO]:
    """The pipeline's log lines in a buffer of the test's own (its handler must not keep a closed capture)."""
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        handler.setStream(previous)


@dataclass
class Cli:
    """`sluice` as a user runs it: exit status, what it printed on stdout and on stderr."""

    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(args))
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def sluice(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


@pytest.fixture
def site() -> Iterator[RunningDemoSite]:
    """The bundled demo catalogue (1,000 books on 50 listing pages) on loopback."""
    with running_demo_site() as running:
        yield running


def said_on_stderr(err: str) -> dict[str, list[str]]:
    """What `sluice run --json` said on stderr, by the line's first word: ``records``, ``summary``, ``note``..."""
    said: dict[str, list[str]] = {}
    for line in err.splitlines():
        name, _, rest = line.partition(" ")
        if rest.strip():
            said.setdefault(name, []).append(rest.strip())
    return said


@dataclass
class LocalCrawls:
    """A specs folder with the demo crawl aimed at the running site, and a state folder `sluice run` fills."""

    specs: Path
    state: Path
    sluice: Cli
    said: dict[str, list[str]] = field(default_factory=dict)
    """What the last `sluice run --json` said on stderr (:func:`said_on_stderr`)."""

    def add_spec(self, name: str, text: str) -> Path:
        path = self.specs / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        load_crawl.cache_clear()
        return path

    def shrink(self, pages: int, crawl: str = "demo-books") -> None:
        """The crawl's seeds cut to its first ``pages`` listing pages (20 books each)."""
        path = self.specs / f"{crawl}.yaml"
        self.add_spec(crawl, path.read_text(encoding="utf-8").replace("stop: 50}", f"stop: {pages}}}"))

    def run(self, crawl: str = "demo-books") -> dict[str, Any]:
        """One `sluice run --json` of the crawl; its JSON result (the run's summary.json). What the command said on
        stderr of the run's files and notes is kept in ``said`` (``said["parquet"]``, ``said["note"]``)."""
        spec = self.specs / f"{crawl}.yaml"
        code, out, err = self.sluice(
            "run", str(spec), "--state", str(self.state), "--allow-loopback", "--json", "--workers", "2"
        )
        assert code in (0, 1), err
        self.said = said_on_stderr(err)
        result: dict[str, Any] = json.loads(out)
        return result


@pytest.fixture
def local(tmp_path: Path, site: RunningDemoSite, sluice: Cli) -> Iterator[LocalCrawls]:
    specs = tmp_path / "crawls"
    specs.mkdir()
    crawls = LocalCrawls(specs, tmp_path / "state", sluice)
    crawls.add_spec("demo-books", DEMO_SPEC.read_text(encoding="utf-8").replace(DEMO_PORT, f"127.0.0.1:{site.port}"))
    yield crawls
    load_crawl.cache_clear()


@contextmanager
def aws_stage(specs: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The stack's queues, tables and bucket on moto (stage dev, as `--stage` finds it), with fake credentials."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "testing")  # restored after the test; fake_credentials() sets the values moto takes
    with mock_aws():
        fake_credentials()
        try:
            yield create_resources(DEFAULT, specs, allow_loopback=True)
        finally:
            clients.reset()
            load_crawl.cache_clear()


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    with aws_stage(tmp_path / "crawls", monkeypatch) as settings:
        yield settings


def record_lines(folder: Path) -> list[dict[str, Any]]:
    """Every record line of a run's output folder."""
    return [json.loads(line) for part in sorted(folder.glob("part-*.jsonl")) for line in part.read_text().splitlines()]

"""The command line entry point and the threaded runner's argument handling."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import sluice
import sluice_tools
from sluice_tools.demosite import Catalogue, main, running_demo_site


def test_refuses_non_loopback_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--host", "0.0.0.0"]) == 2  # noqa: S104 - refusal under test
    assert "loopback" in capsys.readouterr().err
    assert main(["--host", "192.168.1.10"]) == 2


def test_refuses_bad_fractions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fail-503", "0.9", "--fail-429", "0.9"]) == 2
    assert "fractions" in capsys.readouterr().err


@contextmanager
def _served(*args: str) -> Iterator[str]:
    """Run `python -m sluice_tools.demosite --port 0 ARGS`; yields its URL, then stops it with SIGTERM."""
    paths = [str(Path(m.__path__[0]).resolve().parent) for m in (sluice, sluice_tools)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "sluice_tools.demosite", "--port", "0", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:  # noqa: S603
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            assert ready, "the demo site printed no URL"
            line = proc.stdout.readline().strip()
            assert line.startswith("Sluice demo site serving at http://127.0.0.1:")
            yield line.rsplit(" ", 1)[1]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_serves_until_sigterm() -> None:
    with _served("--books", "40", "--crawl-delay", "1.5") as url:
        robots = httpx.get(url + "robots.txt", timeout=5, trust_env=False)
        assert "Crawl-delay: 1.5" in robots.text
        assert httpx.get(url + "catalogue/page-2.html", timeout=5, trust_env=False).status_code == 200


def test_docs_pages_option_sizes_the_docs_site() -> None:
    with _served("--books", "20", "--docs-pages", "150") as url:
        index = httpx.get(url + "docs/index.html", timeout=5, trust_env=False)
        assert index.status_code == 200
        assert "150 articles in 2 sections" in index.text
        assert httpx.get(url + "docs/", timeout=5, trust_env=False).headers["location"] == "/docs/index.html"


def test_runner_routes_keywords_to_config_and_catalogue() -> None:
    with running_demo_site(books=30, per_page=10, latency_ms=1) as site:
        assert site.catalogue.pages == 3
        assert site.config.latency_ms == 1
        assert site.set_config(latency_ms=0).latency_ms == 0
        assert site.set_catalogue(books=40, per_page=10).pages == 4
        assert len(site.set_catalogue(books=5, docs_pages=150).docs.plan.sections) == 2
    with pytest.raises(TypeError, match="unknown"), running_demo_site(bogus=1):
        pass
    with pytest.raises(TypeError, match="either"), running_demo_site(catalogue=Catalogue(books=5), books=6):
        pass

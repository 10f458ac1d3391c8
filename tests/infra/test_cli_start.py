"""`sluice start NAME`: what is missing, said in words a user can act on, never a botocore traceback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from sluice.adapters.aws import clients
from sluice_tools.cli import main


@pytest.fixture(autouse=True)
def bare_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No AWS settings at all: no region, no credentials, no config files, no instance metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    clients.reset()
    yield
    clients.reset()


def test_without_a_region_it_says_how_to_set_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["start", "books"]) == 2
    assert "no AWS region. Set AWS_DEFAULT_REGION" in capsys.readouterr().err


def test_without_credentials_it_says_how_to_get_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["start", "books"]) == 2
    assert "no AWS credentials. Set AWS_PROFILE" in capsys.readouterr().err


def test_a_stage_that_is_not_deployed_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        assert main(["start", "books", "--stage", "prod"]) == 2
    err = capsys.readouterr().err
    assert "AWS refused to invoke sluice-prod-scheduler: ResourceNotFoundException" in err
    assert "Is stage 'prod' deployed in this account and region?" in err


def test_reading_the_runs_of_a_stage_that_is_not_deployed_names_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger adapter raises the domain's store error; the CLI still says what AWS refused and why."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        assert main(["runs", "books", "--stage", "prod"]) == 2
    err = capsys.readouterr().err
    assert "AWS refused to read the runs of books: ResourceNotFoundException" in err
    assert "Is stage 'prod' deployed in this account and region?" in err


def test_reading_the_runs_of_a_stage_without_credentials_says_how_to_get_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["runs", "books", "--stage", "prod"]) == 2
    assert "no AWS credentials. Set AWS_PROFILE" in capsys.readouterr().err


def test_a_crawl_whose_seeds_are_all_on_loopback_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo crawl (seeds on 127.0.0.1) ran only with `sluice run --allow-loopback`: `sluice start` of it said
    nothing of that, and a deployed run would skip every page."""
    specs = Path(__file__).resolve().parents[2] / "crawls"
    assert main(["start", "demo-books", "--specs", str(specs)]) == 2  # refused before any AWS call
    err = capsys.readouterr().err
    assert "sluice start: crawl 'demo-books' cannot run on AWS: its seeds are on loopback" in err
    assert "seeds.template (http://127.0.0.1:8710/catalogue/page-{n}.html)" in err
    assert "--allow-loopback" in err
    (tmp_path / "mixed.yaml").write_text(
        "name: mixed\nseeds:\n  urls: ['https://example.com/', 'http://localhost:8000/']\n"
        "extract:\n  item: body\n  fields:\n    title: {selector: 'h1::text'}\n",
        encoding="utf-8",
    )
    assert main(["start", "mixed", "--specs", str(tmp_path)]) == 2  # not refused: on to AWS (no region here)
    err = capsys.readouterr().err
    assert "note: seeds.urls[1] (http://localhost:8000/) is on loopback" in err
    assert "no AWS region" in err

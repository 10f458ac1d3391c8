"""A spec's secrets on one machine: `sluice run`, `sluice run --emulate-aws` and `sluice crawl` read them from
the environment, and refuse to start, naming each variable, when one is not set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sluice.domain.secrets import local_variable
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.demosite.config import DEMO_LOGIN, DEMO_TOKEN
from sluice_tools.demosite.forward_proxy import running_proxy

from .conftest import SpecData

CRAWLS = Path(__file__).resolve().parents[2] / "crawls"
CRAWL = "members"
SESSION_SECRET = "sluice/test/demo-session"
PASSWORD_SECRET = "ssm:/sluice/test/staff-password"


def write_members_spec(folder: Path, books_spec: SpecData, base_url: str) -> Path:
    data = books_spec(CRAWL, base_url, pages=0, urls=["/members/catalogue/page-1.html", "/staff/catalogue/page-3.html"])
    data["request"] = {
        "cookies": {"demo_session": {"secret": SESSION_SECRET}},
        "basic_auth": {"username": DEMO_LOGIN[0], "password": {"secret": PASSWORD_SECRET}},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{CRAWL}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def export_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_variable(SESSION_SECRET), DEMO_TOKEN)
    monkeypatch.setenv(local_variable(PASSWORD_SECRET), DEMO_LOGIN[1])


@pytest.mark.parametrize("command", [["run"], ["run", "--emulate-aws"], ["crawl"]], ids=" ".join)
def test_a_command_refuses_to_start_naming_every_variable_to_export(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    spec = write_members_spec(tmp_path / "crawls", books_spec, site.base_url)
    state = tmp_path / "state"
    extra = ["--state", str(state)] if command[0] == "run" else ["--out", str(tmp_path / "out.jsonl")]
    code = main([*command, str(spec), "--allow-loopback", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert f"refused: secret {SESSION_SECRET!r} unavailable: the environment variable SLUICE_SECRET_SLUICE_TEST" in err
    assert f"secret {PASSWORD_SECRET!r} unavailable: the environment variable SLUICE_SECRET_SLUICE_TEST" in err
    assert not state.exists()  # nothing was opened
    assert site.stats.total == 0


@pytest.mark.parametrize("emulate", [False, True], ids=["local store", "emulated aws"])
def test_sluice_run_reads_the_secrets_from_the_environment(
    tmp_path: Path,
    site: RunningDemoSite,
    books_spec: SpecData,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    emulate: bool,
) -> None:
    export_secrets(monkeypatch)
    spec = write_members_spec(tmp_path / "crawls", books_spec, site.base_url)
    flags = ["--emulate-aws"] if emulate else []
    code = main(["run", str(spec), "--allow-loopback", "--state", str(tmp_path / "state"), "--json", *flags])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0, out
    assert (out["pages"]["fetched"], out["pages"]["failed"], out["records"]["total"]) == (4, 0, 80)
    (where,) = [line.removeprefix("logs").strip() for line in captured.err.splitlines() if line.startswith("logs ")]
    logs = Path(where).read_text(encoding="utf-8")
    assert "batch done" in logs
    assert DEMO_TOKEN not in logs
    assert DEMO_LOGIN[1] not in logs


def test_sluice_crawl_reads_them_too(
    tmp_path: Path,
    site: RunningDemoSite,
    books_spec: SpecData,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    export_secrets(monkeypatch)
    spec = write_members_spec(tmp_path / "crawls", books_spec, site.base_url)
    records = tmp_path / "out.jsonl"
    assert main(["crawl", str(spec), "--allow-loopback", "--out", str(records), "--json"]) == 0
    capsys.readouterr()
    assert len(records.read_text(encoding="utf-8").splitlines()) == 80


def test_the_shipped_demo_spec_crawls_both_doors_with_the_values_its_comment_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (CRAWLS / "demo-members.yaml").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("#   export "):
            name, _, value = line.removeprefix("#   export ").partition("=")
            monkeypatch.setenv(name, value)
    with running_demo_site(books=100) as site:  # 5 listing pages behind each door
        spec = tmp_path / "crawls" / "demo-members.yaml"
        spec.parent.mkdir()
        spec.write_text(text.replace("http://127.0.0.1:8710", site.base_url), encoding="utf-8")
        code = main(["run", str(spec), "--allow-loopback", "--state", str(tmp_path / "state"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert (out["pages"]["fetched"], out["records"]["total"]) == (10, 200)


def test_sluice_crawl_goes_through_the_specs_proxy_pool(
    tmp_path: Path,
    site: RunningDemoSite,
    books_spec: SpecData,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine-only crawl resolves request.proxies as the pipeline does: every page through the pool."""
    with running_proxy("forward", ("crawler", "test-pool-works-pw")) as works:
        monkeypatch.setenv(local_variable("proxies/works"), works.url(("crawler", "test-pool-works-pw")))
        data = books_spec("pooled", site.base_url, pages=2, max_depth=0)
        data["request"] = {"proxies": [{"name": "works", "secret": "proxies/works"}]}
        spec = tmp_path / "pooled.yaml"
        spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        records = tmp_path / "out.jsonl"
        assert main(["crawl", str(spec), "--allow-loopback", "--out", str(records), "--json"]) == 0
    out = capsys.readouterr().out
    assert len(records.read_text(encoding="utf-8").splitlines()) == 40
    assert sorted(line.split()[1].rsplit("/", 1)[1] for line in works.log.requests if "catalogue" in line) == [
        "page-1.html",
        "page-2.html",
    ]
    assert "test-pool-works-pw" not in out

"""`sluice run --batch-messages`: the local runner's own batch size, apart from the stack's SQS batches."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra.config import DEFAULT

from sluice import defaults
from sluice.domain.clock import ShiftedClock
from sluice.spec import parse_spec
from sluice_tools.cli import main
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.runner.local import LocalFleet

from .conftest import SpecData

CRAWL = "batches"
URLS = 400
"""One host's 40 messages of 10 URLs: twice the stack's backlog of 20 messages a host."""


def one_host(tmp_path: Path, books_spec: SpecData, base_url: str) -> tuple[Path, dict[str, Any]]:
    data = books_spec(CRAWL, base_url, pages=0, urls=[f"/catalogue/page-1.html?copy={n}" for n in range(URLS)])
    data["follow"]["max_depth"] = 0
    crawls = tmp_path / "crawls"
    crawls.mkdir()
    (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return crawls, data


def batches(logs: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in Path(logs).read_text(encoding="utf-8").splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("message") == "batch done"]


def test_a_local_batch_takes_batch_messages_of_one_host_past_the_stacks_backlog(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """25 messages a batch, though the stack queues 20 of a host at once: locally a host's backlog holds a batch.

    The host's first batch leaves out the message its fan-out sent last (the pointer to its next wave, held
    until the fan-out ended): that one comes alone, and each wave after it is a batch."""
    crawls, data = one_host(tmp_path, books_spec, site.base_url)
    assert (DEFAULT.batch_size, DEFAULT.host_backlog_messages) == (10, 20)
    fleet = LocalFleet(crawls, tmp_path / "state", workers=2, batch_messages=25, allow_loopback=True)

    run = fleet.run(parse_spec(data))

    assert run.summary.pages.fetched == URLS
    assert [b["messages"] for b in batches(run.outputs["logs"])] == [25, 1, 15]
    assert fleet.tuning.batch_size == DEFAULT.batch_size  # what the pipeline packs with and prices stays the stack's


def test_the_default_local_batch_is_the_documented_number(tmp_path: Path) -> None:
    fleet = LocalFleet(tmp_path / "crawls", tmp_path / "state")
    assert fleet.batch_messages == defaults.LOCAL_BATCH_MESSAGES == 100
    assert fleet.tuning.host_backlog_messages == 100


@pytest.mark.parametrize("wrong", [0, -1, defaults.LOCAL_BATCH_MESSAGES_MAX + 1, 2.5, True])
def test_a_batch_size_out_of_range_is_refused_naming_the_setting(tmp_path: Path, wrong: Any) -> None:
    with pytest.raises(ValueError, match=r"batch_messages must be a whole number from 1 to 1000, got "):
        LocalFleet(tmp_path / "crawls", tmp_path / "state", batch_messages=wrong)


@pytest.mark.parametrize("wrong", ["0", "1001", "many"])
def test_the_cli_refuses_a_batch_size_out_of_range_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wrong: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", str(tmp_path / "x.yaml"), "--batch-messages", wrong])
    assert exited.value.code == 2
    assert f"argument --batch-messages: takes a whole number from 1 to 1000, not '{wrong}'" in capsys.readouterr().err


def test_the_cli_passes_its_batch_size_to_the_run(
    tmp_path: Path, site: RunningDemoSite, books_spec: SpecData, capsys: pytest.CaptureFixture[str]
) -> None:
    crawls, _ = one_host(tmp_path, books_spec, site.base_url)
    spec, state = crawls / f"{CRAWL}.yaml", tmp_path / "state"
    code = main(["run", str(spec), "--allow-loopback", "--state", str(state), "--json", "--batch-messages", "40"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # ?copy=N is no listing page to the spec (extract.pages): no records, an unhealthy run
    assert out["pages"]["fetched"] == URLS
    (logs,) = (state / "logs").glob("*.jsonl")
    assert [b["messages"] for b in batches(str(logs))] == [40, 1]


def test_a_batch_outlasting_fifteen_minutes_is_never_handed_to_a_second_worker(
    tmp_path: Path, books_spec: SpecData
) -> None:
    """A batch of a slow host outlives the 900 s its messages were hidden for: another worker took them while
    it still visited them, asking the host twice at once and fetching its pages again. Now they stay its own."""
    pages = [f"/catalogue/page-{n}.html" for n in range(1, 41)]
    clock = ShiftedClock()
    with running_demo_site(books=len(pages) * 20, latency_ms=10) as site:
        data = books_spec(CRAWL, site.base_url, pages=0, urls=pages, max_depth=0)
        data["politeness"] |= {"concurrency": 1, "concurrency_per_domain": 1}
        crawls = tmp_path / "crawls"
        crawls.mkdir()
        (crawls / f"{CRAWL}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")

        def a_slow_batch() -> None:  # the one batch has begun: on the pipeline's clock, it lasts 1,000 s
            give_up = time.monotonic() + 30
            while site.stats.total < 5 and time.monotonic() < give_up:
                time.sleep(0.005)
            clock.advance(1000)

        moves = threading.Thread(target=a_slow_batch, daemon=True)
        moves.start()
        fleet = LocalFleet(crawls, tmp_path / "state", workers=2, batch_messages=4, allow_loopback=True, clock=clock)
        run = fleet.run(parse_spec(data))
        moves.join(30)
        counts = {page: site.stats.count(page) for page in pages}
        most_at_once = max(site.stats.snapshot(with_log=False)["max_in_flight_by_host"].values())
    assert clock() - time.time() > 999  # the batch did outlast the old visibility
    assert run.summary.pages.fetched == len(pages)
    assert counts == dict.fromkeys(pages, 1)
    assert most_at_once == 1

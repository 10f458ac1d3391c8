"""What moto does not enforce, made visible: eight fetchers on the AWS path conflict nowhere and heat no item.

DynamoDB cancels a transaction that overlaps another write to one of its items
(``TransactionConflict``, which botocore does not retry), and one item takes about 1,000 write
units a second at most. moto models neither; :class:`DynamoContention` does, holding each written
item for a modelled service time and failing the overlaps a transaction is part of, and it counts
writes per item per second. A run of eight emulated fetcher containers must end with exact counts,
no conflict, and no item written more than 100 times in any second (the figures print after the run).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate.runner import EmulatedRunner
from sluice_tools.meter.calls import observe_calls
from sluice_tools.meter.contention import DynamoContention
from sluice_tools.runner.session import LocalRun

from .conftest import SpecData

WORKERS = 8
LISTINGS = 80
DOCS = 300
HOT_ITEM_LIMIT = 100


@pytest.fixture
def busy_site() -> Iterator[RunningDemoSite]:
    with running_demo_site(books=LISTINGS * 20, docs_pages=DOCS, latency_ms=5) as site:
        yield site


@pytest.fixture(autouse=True)
def _fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def write(folder: Path, data: dict[str, Any]) -> Any:
    spec = parse_spec(data)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{spec.name}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec


def docs_spec(base_url: str) -> dict[str, Any]:
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "crawls" / "demo-docs.yaml").read_text())
    text = (
        json.dumps(shipped)
        .replace("http://127.0.0.1:8710", base_url)
        .replace("127\\\\.0\\\\.0\\\\.1:8710", "127\\\\.0\\\\.0\\\\.1:" + base_url.rsplit(":", 1)[1])
    )
    data: dict[str, Any] = json.loads(text)
    data["name"] = "docs"
    data["politeness"] |= {"concurrency": 4, "concurrency_per_domain": 4}
    return data


def run_under_contention(tmp_path: Path, data: dict[str, Any]) -> tuple[LocalRun, DynamoContention]:
    specs = tmp_path / "crawls"
    spec = write(specs, data)
    contention = DynamoContention()
    with observe_calls(contention):
        run = EmulatedRunner(specs, tmp_path / "state", workers=WORKERS, allow_loopback=True).run(spec)
    return run, contention


def output_keys(run: LocalRun) -> list[str]:
    folder = Path(run.outputs["records"])
    return [json.loads(line)["_key"] for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_eight_fetchers_on_seeds_conflict_nowhere_and_write_no_item_over_100_a_second(
    tmp_path: Path, busy_site: RunningDemoSite, books_spec: SpecData, record_property: Callable[[str, object], None]
) -> None:
    data = books_spec("books", busy_site.base_url, pages=LISTINGS)
    data["politeness"] |= {"concurrency": 4, "concurrency_per_domain": 4}
    run, contention = run_under_contention(tmp_path, data)

    assert run.summary.status == "finished"
    assert run.summary.pages.fetched == LISTINGS
    keys = output_keys(run)
    assert len(keys) == len(set(keys)) == LISTINGS * 20
    assert contention.conflicts() == {}
    rates = contention.rates(top=8)
    record_property("measured", "seeds, 8 fetchers, hottest items:\n" + "\n".join(f"  {r}" for r in rates.items))
    assert rates.peak_per_s <= HOT_ITEM_LIMIT


def test_eight_fetchers_on_a_link_heavy_site_conflict_nowhere_and_write_no_item_over_100_a_second(
    tmp_path: Path, busy_site: RunningDemoSite, record_property: Callable[[str, object], None]
) -> None:
    run, contention = run_under_contention(tmp_path, docs_spec(busy_site.base_url))

    pages = run.summary.pages
    assert run.summary.status == "finished"
    assert (pages.seeds, pages.fetched, pages.failed) == (1, pages.enqueued, 0)
    assert pages.enqueued > DOCS  # the articles, their section indexes and the index
    keys = output_keys(run)
    assert len(keys) == len(set(keys)) == DOCS
    assert contention.conflicts() == {}
    rates = contention.rates(top=8)
    record_property("measured", "link-heavy, 8 fetchers, hottest items:\n" + "\n".join(f"  {r}" for r in rates.items))
    assert rates.peak_per_s <= HOT_ITEM_LIMIT

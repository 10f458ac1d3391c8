"""Least privilege, proven: whole runs on moto with IAM enforced, each function holding only its role's grants.

Each function's role policy comes from the synthesized template (``tools/sluice_tools/emulate/grants.py``);
the scheduler, the fetchers (and the event source mapping, which polls with the fetcher's role) and
the finalizer each call AWS as an IAM user with exactly that policy. A first run and a nightly run
(conditional requests, reused records, the catalog) against the demo site on 127.0.0.1: any call a
function makes that its role does not allow fails as AccessDenied and fails the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from infra.app import context
from infra.config import DEFAULT
from infra.crawls import deployed_specs
from infra.nag import acknowledge
from infra.stack import SluiceStack
from moto import mock_aws
from moto.athena.models import athena_backends

from sluice.adapters.aws.athena import AthenaQueries
from sluice.adapters.aws.clients import client
from sluice.domain.layout import summary_key
from sluice.handlers import bootstrap, fetcher, finalizer, scheduler
from sluice.pipeline.finalize.columnar import check_recent
from sluice.pipeline.finalize.columnar_state import CopyState, copy_state_key, describe
from sluice.pipeline.reextract import reextract_run
from sluice.pipeline.services import load_crawl
from sluice.settings import Settings
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite, running_demo_site
from sluice_tools.emulate import grants
from sluice_tools.emulate.context import LocalContext
from sluice_tools.emulate.events import sqs_record
from sluice_tools.emulate.resources import ACCOUNT, REGION, create_resources, fake_credentials
from sluice_tools.emulate.shards import drain_shards

CRAWL = "granted"
MAX_BATCHES = 100
ADMIN = "operator"
EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}

pytestmark = pytest.mark.timeout(180)


def _spec(base_url: str) -> dict[str, Any]:
    return {
        "name": CRAWL,
        "seeds": {"template": f"{base_url}/catalogue/page-{{n}}.html", "range": {"start": 1, "stop": 3}},
        "follow": {"selectors": ["li.next a"], "max_depth": 1, "max_pages": 50},
        "extract": {
            "item": "article.product_pod",
            "fields": {
                "title": {"selector": "h3 a::attr(title)", "required": True},
                "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"], "required": True},
                "price": {"selector": "p.price_color::text", "process": ["strip", "price"]},
            },
            "key": ["url"],
        },
        "politeness": {"concurrency": 8, "timeout_seconds": 5},
    }


class GrantedStack:
    """The stack's resources on moto, each function's role as an IAM user, calls enforced."""

    def __init__(self, settings: Settings, keys: dict[str, grants.Keys], policies: dict[str, Any]) -> None:
        self.settings, self.keys = settings, keys
        self.checks = {name: grants.ResourceCheck(document) for name, document in policies.items()}
        self.finalize_requests: list[dict[str, object]] = []

    def as_function(self, function: str, call: Callable[[], Any]) -> Any:
        """``call`` with the function's keys and services built on them (a cold start with that role)."""
        name = DEFAULT.name(function)
        with grants.acting_as(self.keys[name], self.checks[name]):
            bootstrap.install(
                bootstrap.aws_services(
                    self.settings, finalize_later=self.finalize_requests.append, continue_start=lambda _: None
                )
            )
            try:
                return call()
            finally:
                fetcher.close_container()
                bootstrap.reset()

    def run(self, crawl: str = CRAWL) -> dict[str, Any]:
        answer = self.as_function("scheduler", lambda: scheduler.handler({"crawl": crawl}, _context("scheduler")))
        assert answer["complete"] is True, answer
        for _ in range(MAX_BATCHES):
            if not self.as_function("fetcher", self._one_batch):
                break
        else:
            raise AssertionError(f"queue not drained in {MAX_BATCHES} batches")
        for _ in range(MAX_BATCHES):
            if not self.finalize_requests:
                break
            request = self.finalize_requests.pop(0)
            self.as_function("finalizer", lambda r=request: finalizer.handler(r, _context("finalizer")))  # type: ignore[misc]
            # The shard queue's event source mapping polls with the finalizer's role, and invokes it.
            self.as_function("finalizer", self._shard_tasks)
        with grants.acting_as(self.keys[ADMIN]):  # the test reads as an operator, not as a function
            raw = client("s3").get_object(Bucket=self.settings.bucket, Key=summary_key(crawl, answer["run_id"]))
            summary: dict[str, Any] = json.loads(raw["Body"].read())
        return summary

    def _shard_tasks(self) -> list[dict[str, Any]]:
        invoke = lambda event: finalizer.handler(event, _context("finalizer"))  # noqa: E731
        return drain_shards(self.settings.finalize_queue_url, invoke)

    def _one_batch(self) -> bool:
        """The event source mapping's poll (it uses the fetcher's role), one invocation, its deletes."""
        sqs = client("sqs")
        url = self.settings.queue_url
        received = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
        ).get("Messages", [])
        if not received:
            return False
        answer = fetcher.handler({"Records": [sqs_record(m, url) for m in received]}, _context("fetcher"))
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        done = [m for m in received if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            )
        return True


def _context(function: str) -> LambdaContext:
    # The deployed function's own timeout: a scheduler with little time left continues its fan-out elsewhere.
    timeout_s = getattr(DEFAULT, function).timeout_s
    return cast(LambdaContext, LocalContext(function_name=DEFAULT.name(function), timeout_s=timeout_s))


@pytest.fixture
def granted(resources: dict[str, Any], tmp_path: Path, site: RunningDemoSite) -> Iterator[GrantedStack]:
    with _granted(resources, tmp_path, _spec(site.base_url)) as stack:
        yield stack


@pytest.fixture(scope="module")
def archiving_resources() -> dict[str, Any]:
    """The stack with the shipped specs and one deployed spec that keeps its responses (output.archive)."""
    app = cdk.App(context={**context(), "aws:cdk:bundling-stacks": [], "alarm_email": "oncall@example.com"})
    archiving = parse_spec(_spec("https://shop.example") | {"name": "archiving", "output": {"archive": True}})
    stack = SluiceStack(app, "Sluice-dev", config=DEFAULT, specs=[*deployed_specs(), archiving])
    acknowledge(stack)
    found: dict[str, Any] = Template.from_stack(stack).to_json()["Resources"]
    return found


@pytest.fixture
def granted_archive(
    archiving_resources: dict[str, Any], tmp_path: Path, site: RunningDemoSite
) -> Iterator[GrantedStack]:
    with _granted(archiving_resources, tmp_path, _spec(site.base_url) | {"output": {"archive": True}}) as stack:
        yield stack


@contextmanager
def _granted(resources: dict[str, Any], tmp_path: Path, spec: dict[str, Any]) -> Iterator[GrantedStack]:
    specs = tmp_path / "crawls"
    specs.mkdir()
    (specs / f"{CRAWL}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    load_crawl.cache_clear()
    with mock_aws():
        fake_credentials()
        settings = create_resources(DEFAULT, specs, allow_loopback=True)
        policies = grants.function_policies(resources, settings.bucket)
        keys = grants.create_users({**policies, ADMIN: EVERYTHING})
        with grants.enforced():
            yield GrantedStack(settings, keys, policies)
        bootstrap.reset()
    load_crawl.cache_clear()


@pytest.fixture
def site() -> Iterator[RunningDemoSite]:
    with running_demo_site(books=60) as running:
        yield running


def test_enforcement_is_on_a_call_outside_the_role_is_denied(granted: GrantedStack) -> None:
    """The check can fail: the scheduler's role may not delete from the queue, and moto says so."""

    def delete_from_queue() -> None:
        client("sqs").purge_queue(QueueUrl=granted.settings.queue_url)

    with pytest.raises(ClientError) as denied:
        granted.as_function("scheduler", delete_from_queue)
    error = denied.value.response["Error"]
    assert error["Code"] in {"AccessDenied", "AccessDeniedException", "403"}, error
    assert "PurgeQueue" in str(denied.value) or "not authorized" in str(denied.value).lower(), error


def test_a_table_the_role_does_not_name_is_refused(granted: GrantedStack) -> None:
    """DynamoDB's resources are checked on the client side: the scheduler may not write the records table."""

    def write_records() -> None:
        client("dynamodb").put_item(TableName=DEFAULT.records_table, Item={"pk": {"S": "x"}, "sk": {"S": "y"}})

    with pytest.raises(PermissionError, match="records"):
        granted.as_function("scheduler", write_records)


def test_a_first_and_a_nightly_run_need_nothing_the_roles_do_not_grant(granted: GrantedStack) -> None:
    # Finalize shards of one page: the runs are finalized by queued shard tasks, each with the finalizer's role.
    granted.settings = granted.settings.model_copy(update={"finalize_shard_pages": 1})
    first = granted.run()
    assert first["status"] == "finished"
    assert first["finalize_shards"] == 4  # queued shard tasks, sent, polled and run with the finalizer's role
    assert first["pages"]["fetched"] == 3
    assert first["records"]["total"] == 60
    nightly = granted.run()  # conditional requests, records reused from the first run's output
    assert nightly["pages"]["not_modified"] == 3
    assert nightly["records"]["total"] == 60
    assert nightly["verdict"]["healthy"] is True
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_a_run_seeded_from_sitemaps_and_its_nightly_need_nothing_the_roles_do_not_grant(
    granted: GrantedStack, site: RunningDemoSite
) -> None:
    """The scheduler reads sitemaps through robots.txt, stores their pages and reads them back (work/)."""
    data = _spec(site.base_url) | {
        "name": "mapped",
        "seeds": {"urls": [f"{site.base_url}/catalogue/page-1.html"], "sitemaps": "from_robots"},
    }
    data["follow"] = {"max_depth": 0, "max_pages": 200}
    (granted.settings.specs_dir / "mapped.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    load_crawl.cache_clear()
    first = granted.run("mapped")
    assert (first["sitemaps"]["refused"], first["sitemaps"]["urls"]) == ([], 63)  # 3 listings, 60 books
    assert first["records"]["total"] == 60
    nightly = granted.run("mapped")
    assert nightly["pages"]["not_due"] == 63
    assert nightly["records"]["total"] == 60
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_a_run_whose_host_backlog_waits_in_s3_needs_nothing_the_roles_do_not_grant(
    granted: GrantedStack, site: RunningDemoSite
) -> None:
    """At a backlog cap of one message, 53 of the 63 seeds wait in the run's work prefix: the scheduler writes the
    chunks, the fetchers read them as they refill the host's waves."""
    granted.settings = granted.settings.model_copy(update={"host_backlog_messages": 1})
    data = _spec(site.base_url) | {
        "name": "waves",
        "seeds": {"urls": [f"{site.base_url}/catalogue/page-1.html"], "sitemaps": "from_robots"},
    }
    data["follow"] = {"max_depth": 0, "max_pages": 200}
    (granted.settings.specs_dir / "waves.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    load_crawl.cache_clear()
    first = granted.run("waves")
    assert (first["status"], first["pages"]["fetched"], first["records"]["total"]) == ("finished", 63, 60)
    nightly = granted.run("waves")
    assert (nightly["status"], nightly["pages"]["not_due"], nightly["records"]["total"]) == ("finished", 63, 60)
    with grants.acting_as(granted.keys[ADMIN]):
        listed = client("s3").list_objects_v2(Bucket=granted.settings.bucket, Prefix="work/crawl=waves/")
    assert any("/backlog/" in o["Key"] for o in listed.get("Contents", []))
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_a_typed_run_whose_books_read_their_listings_back_needs_nothing_the_roles_do_not_grant(
    granted: GrantedStack, site: RunningDemoSite
) -> None:
    """Page types with carried data: the nightly's books, seeded from the catalog, read what their listing
    carried this run (a strongly consistent Query of the ledger by the fetcher) and claims keep rule and data."""
    data = _spec(site.base_url) | {"name": "typed"}
    listing = data.pop("extract")
    data["follow"] = {"max_depth": 1, "max_pages": 200}
    data["types"] = {
        "listing": {
            "pages": r"/catalogue/page-\d+\.html$",
            "extract": listing,
            "follow": {"books": {"selectors": ["article.product_pod h3 a"], "carry": ["price"]}},
        },
        "book": {"via": ["books"], "extract": {"fields": {"name": "div.product_main h1::text", "url": "::page_url"}}},
    }
    (granted.settings.specs_dir / "typed.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    load_crawl.cache_clear()
    first = granted.run("typed")
    assert first["types"]["book"]["records"] == 60
    site.set_catalogue(books=60, version=1, changed_fraction=0.1)
    try:
        nightly = granted.run("typed")
    finally:
        site.set_catalogue(books=60)
    assert nightly["types"]["book"]["changed"] >= 1  # a changed card's price reached its book
    assert nightly["verdict"]["healthy"] is True
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_a_run_that_keeps_its_responses_needs_only_its_archive_put_and_reextract_runs_as_the_operator(
    granted_archive: GrantedStack, archiving_resources: dict[str, Any]
) -> None:
    """The fetcher writes archive/ (PutObject alone, only in a stack whose specs ask for it); re-extraction
    is the operator's CLI, with the operator's credentials."""
    fetcher_policy = grants.function_policies(archiving_resources, granted_archive.settings.bucket)[
        DEFAULT.name("fetcher")
    ]
    on_archive = [s for s in fetcher_policy["Statement"] if "/archive/*" in json.dumps(s.get("Resource"))]
    assert [s["Action"] for s in on_archive] == ["s3:PutObject"]
    first = granted_archive.run()
    assert first["records"]["total"] == 60
    nightly = granted_archive.run()  # reused pages keep the first run's archive references
    assert nightly["pages"]["not_modified"] == 3
    assert {name: check.refused for name, check in granted_archive.checks.items()} == {
        n: [] for n in granted_archive.checks
    }
    with grants.acting_as(granted_archive.keys[ADMIN]):
        services = bootstrap.aws_services(
            granted_archive.settings, finalize_later=lambda _: None, continue_start=lambda _: None
        )
        done = reextract_run(CRAWL, nightly["run_id"], services)
    assert done.pages == 3
    assert done.summary.to_json()["reextracted"]["from_runs"] == [first["run_id"]]
    assert done.summary.to_json()["records"]["total"] == 60


# -- the Parquet copy (an Athena UNLOAD the finalizer starts; moto records it and runs no SQL) ---------------


def _executions(granted: GrantedStack) -> list[dict[str, Any]]:
    """The Parquet copy's workgroup's queries, read as the operator."""
    with grants.acting_as(granted.keys[ADMIN]):
        athena = client("athena")
        ids = athena.list_query_executions(WorkGroup=DEFAULT.parquet_workgroup)["QueryExecutionIds"]
        return [athena.get_query_execution(QueryExecutionId=i)["QueryExecution"] for i in ids]


def _copy_state(granted: GrantedStack, run_id: str) -> dict[str, Any]:
    with grants.acting_as(granted.keys[ADMIN]):
        raw = client("s3").get_object(Bucket=granted.settings.bucket, Key=copy_state_key(CRAWL, run_id))
    state: dict[str, Any] = json.loads(raw["Body"].read())
    return state


def test_a_finalized_run_starts_its_parquet_copy_once_with_the_finalizers_role(granted: GrantedStack) -> None:
    """One UNLOAD of the run's records, in the copy's own workgroup (cut off past a whole large run, not at the
    users' 20 GB) and the stack's database, into the run's parquet/ folder; a redelivered finalizer event and a
    sweep start nothing more; the sweep records how the query ended."""
    run_id = granted.run()["run_id"]
    bucket = granted.settings.bucket
    (query,) = _executions(granted)
    expected = (  # the table's columns in the spec file's order (yaml.safe_dump sorted its fields)
        'UNLOAD (SELECT "_key", "_page", "price", "title", "url" FROM "granted" WHERE run = \'RUN\') '
        "TO 's3://BUCKET/runs/crawl=granted/run=RUN/parquet/' WITH (format = 'PARQUET', compression = 'ZSTD')"
    )
    assert query["Query"] == expected.replace("RUN", run_id).replace("BUCKET", bucket)
    assert (query["WorkGroup"], query["QueryExecutionContext"]) == (
        "sluice-dev-parquet-copy",
        {"Database": "sluice_dev"},
    )
    with grants.acting_as(granted.keys[ADMIN]):
        athena = client("athena")
        assert athena.list_query_executions(WorkGroup=DEFAULT.workgroup)["QueryExecutionIds"] == []  # the users' 20 GB
        configuration = athena.get_work_group(WorkGroup=query["WorkGroup"])["WorkGroup"]["Configuration"]
    assert configuration["BytesScannedCutoffPerQuery"] == DEFAULT.parquet_scan_limit_gb * 1_000_000_000
    state = _copy_state(granted, run_id)
    assert (state["status"], state["generation"]) == ("RUNNING", "finalized")
    assert [t["query_id"] for t in state["tables"]] == [query["QueryExecutionId"]]

    again = {"crawl": CRAWL, "run_id": run_id}  # the fetchers' trigger, delivered once more after the verdict
    answer = granted.as_function("finalizer", lambda: finalizer.handler(again, _context("finalizer")))
    assert answer == {"finalized": []}
    granted.as_function("finalizer", lambda: finalizer.handler({}, _context("finalizer")))  # the sweep
    assert len(_executions(granted)) == 1
    state = _copy_state(granted, run_id)
    assert state["status"] == "SUCCEEDED"  # moto's query ends at once; the sweep read it with GetQueryExecution
    assert state["tables"][0]["state"] == "SUCCEEDED"
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_a_copy_never_started_is_started_by_the_sweep_and_its_failure_recorded(granted: GrantedStack) -> None:
    """The finalizer stopped between its verdict and the start: ten minutes on, the sweep starts the copy. That
    UNLOAD fails: the next sweep records it (FAILED, with why) and leaves it so; `sluice show` says it."""
    run_id = granted.run()["run_id"]
    with grants.acting_as(granted.keys[ADMIN]):
        client("s3").delete_object(Bucket=granted.settings.bucket, Key=copy_state_key(CRAWL, run_id))
        run = bootstrap.aws_services(
            granted.settings, finalize_later=lambda _: None, continue_start=lambda _: None
        ).ledger.get_run(CRAWL, run_id)
    assert run is not None
    assert run.finished_at is not None
    finished = datetime.fromisoformat(run.finished_at)

    def sweep_at(moment: datetime) -> list[CopyState]:
        services = bootstrap.services()
        assert services.parquet is not None
        specs = [services.spec(CRAWL)]
        return check_recent(
            services.parquet.engine, services.objects, services.ledger, specs, services.parquet.bucket, now=moment
        )

    assert granted.as_function("finalizer", lambda: sweep_at(finished + timedelta(minutes=1))) == []  # may be starting
    (started,) = granted.as_function("finalizer", lambda: sweep_at(finished + timedelta(minutes=11)))
    assert started.status == "RUNNING"
    assert len(_executions(granted)) == 2  # the finalizer's, and the sweep's
    assert _copy_state(granted, run_id)["tables"][0]["query_id"] == started.tables[0].query_id

    athena_backends[ACCOUNT][REGION].executions[started.tables[0].query_id].status = "FAILED"
    granted.as_function("finalizer", lambda: finalizer.handler({}, _context("finalizer")))  # the sweep
    state = _copy_state(granted, run_id)
    assert state["status"] == "FAILED"
    assert state["reason"] == "the UNLOAD of granted ended FAILED: no reason given"
    assert describe(CopyState.from_json(json.dumps(state).encode()), "s3://x/").startswith(
        "NOT WRITTEN: the UNLOAD of granted ended FAILED"
    )
    granted.as_function("finalizer", lambda: finalizer.handler({}, _context("finalizer")))  # settled: left as is
    assert _copy_state(granted, run_id)["status"] == "FAILED"
    assert len(_executions(granted)) == 2
    assert {name: check.refused for name, check in granted.checks.items()} == {n: [] for n in granted.checks}


def test_athenas_writes_for_the_copy_are_granted_to_the_finalizer_and_nothing_beside(granted: GrantedStack) -> None:
    """Athena writes an UNLOAD's files and manifest with the caller's credentials: the finalizer's role may write
    the run's parquet/ folder and the workgroup's results, and not, say, the seed files."""
    bucket = granted.settings.bucket
    target = f"runs/crawl={CRAWL}/run=20261201T000000Z-000000/parquet/part-0"

    def athena_writes() -> None:
        s3 = client("s3")
        s3.put_object(Bucket=bucket, Key=target, Body=b"PAR1")
        s3.put_object(Bucket=bucket, Key=f"{DEFAULT.parquet_results_prefix}q-manifest.csv", Body=b"")
        s3.get_bucket_location(Bucket=bucket)

    granted.as_function("finalizer", athena_writes)

    def write_seeds() -> None:
        client("s3").put_object(Bucket=bucket, Key=f"seeds/{CRAWL}/urls.txt", Body=b"")

    def read_users_results() -> None:
        client("s3").get_object(Bucket=bucket, Key=f"{DEFAULT.query_results_prefix}someones-query.csv")

    with pytest.raises(ClientError, match="AccessDenied"):
        granted.as_function("finalizer", write_seeds)
    with pytest.raises(ClientError, match="AccessDenied"):
        granted.as_function("finalizer", read_users_results)
    with pytest.raises(ClientError, match="AccessDenied"):
        granted.as_function("fetcher", athena_writes)


def test_the_finalizer_may_not_start_a_query_in_the_users_20_gb_workgroup(granted: GrantedStack) -> None:
    """Its grant is on the copy's workgroup only: an UNLOAD started in the users' workgroup (whose cut-off would
    cancel a large run's copy) is refused, one in the copy's is not."""

    def start_in(workgroup: str) -> str:
        engine = AthenaQueries(workgroup, DEFAULT.glue_database)
        return engine.start("SELECT 1", "t" * 32)

    with pytest.raises(PermissionError, match=f"workgroup/{DEFAULT.workgroup}"):
        granted.as_function("finalizer", lambda: start_in(DEFAULT.workgroup))
    assert granted.as_function("finalizer", lambda: start_in(DEFAULT.parquet_workgroup))
    assert granted.checks[DEFAULT.finalizer_function].refused == [
        f"athena:StartQueryExecution on arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/{DEFAULT.workgroup}"
    ]

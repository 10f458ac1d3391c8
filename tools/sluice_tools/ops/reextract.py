"""`sluice reextract RUN`: a finished run's records rebuilt from its raw archive with a changed spec, no request sent.

The rebuilding is the pipeline's (:mod:`sluice.pipeline.reextract`), on the same ports as everything
else: here it gets the local state folder's adapters or, with ``--stage``, the deployed stage's
ledger table and bucket with your AWS credentials (as `sluice redrive` does): no function is
invoked and no function role reads the archive. The spec is ``--spec`` or the crawl's spec in
the specs folder (``crawls/NAME.yaml``), which is what the next nightly run uses too.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from sluice.adapters.aws.athena import AthenaQueries
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.frontier import DynamoFrontier
from sluice.adapters.aws.ledger import DynamoRunLedger
from sluice.adapters.aws.objects import S3Objects
from sluice.adapters.aws.queue import SqsQueue
from sluice.adapters.aws.records import DynamoRecords
from sluice.adapters.local import LocalStore
from sluice.adapters.local.store import DB_NAME
from sluice.domain.clock import SYSTEM_CLOCK
from sluice.domain.layout import parquet_prefix
from sluice.domain.runs import RunState
from sluice.domain.summary import RecordCounts, Reextraction
from sluice.pipeline.finalize.columnar import start_copy
from sluice.pipeline.finalize.columnar_state import CopyState
from sluice.pipeline.reextract import Projection, Reextracted, project_reextraction, reextract_run
from sluice.pipeline.services import Services, Tuning
from sluice.spec import CrawlSpec, find_spec, load_spec
from sluice_tools.ops.history import NoSuchRun, StageHistory, no_local_runs, run_named
from sluice_tools.ops.stage import Stage, aws_errors
from sluice_tools.runner.parquet import rewrite_parquet
from sluice_tools.runner.session import exclusive, logs_to


class Opened(NamedTuple):
    run: RunState
    spec: CrawlSpec
    services: Services


def _spec(spec_path: Path | None, specs_dir: Path, crawl: str) -> CrawlSpec:
    if spec_path is not None:
        return load_spec(spec_path)
    path = find_spec(specs_dir, crawl)
    if path is not None:
        return load_spec(path, named_after_file=True)
    raise NoSuchRun(f"no spec for crawl {crawl!r} in {specs_dir}/ (pass --spec SPEC)")


def _never(_: dict[str, object]) -> None:
    raise RuntimeError("re-extraction asks no function to run")  # it finalizes nothing, starts nothing


@contextmanager
def _local(state_dir: Path, run_id: str, spec_path: Path | None, specs_dir: Path) -> Iterator[Opened]:
    """The run of the local state folder, its spec and the store's services, the folder held the while."""
    if not (state_dir / DB_NAME).is_file():
        raise NoSuchRun(no_local_runs(state_dir))
    with exclusive(state_dir):
        store = LocalStore.open(state_dir)
        try:
            run = store.ledger.find_run(run_id)
            if run is None:
                raise NoSuchRun(f"no run {run_id} in {state_dir}/ (`sluice runs NAME` lists a crawl's runs)")
            spec = _spec(spec_path, specs_dir, run.crawl)
            folder = spec_path.parent if spec_path is not None else specs_dir
            yield Opened(run, spec, store.services(folder, Tuning(), finalize_later=_never, continue_start=_never))
        finally:
            store.close()


def reextract_local(
    state_dir: Path, run_id: str, spec_path: Path | None, specs_dir: Path, *, force: bool = False
) -> Reextracted:
    """Re-extract a run of the local state folder (refused while a `sluice run` holds the folder, and when the new
    records would fail their checks unless ``force``)."""
    with _local(state_dir, run_id, spec_path, specs_dir) as (run, spec, services):
        # The pipeline's log lines go where the run's went (`sluice logs RUN` shows both).
        log = state_dir / "logs" / f"{run.crawl}-{run_id}.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as sink, logs_to(sink):
            done = reextract_run(run.crawl, run_id, services, spec, force=force)
            # The run's Parquet copy is its records again: rewritten from the rebuilt JSON Lines (on failure
            # it is gone, logged, and queries read the JSON Lines).
            rewrite_parquet(spec, state_dir / "objects", run_id)
            return done


def project_local(state_dir: Path, run_id: str, spec_path: Path | None, specs_dir: Path) -> Projection:
    """What re-extracting a run of the local state folder would make of its records, nothing written."""
    with _local(state_dir, run_id, spec_path, specs_dir) as (run, spec, services):
        return project_reextraction(run.crawl, run_id, services, spec)


@contextmanager
def _staged(stage: Stage, run_id: str, spec_path: Path | None, specs_dir: Path) -> Iterator[Opened]:
    """The run of a deployed stage, its spec and the stage's services (with your credentials)."""
    history = StageHistory(stage, specs_dir)
    run = run_named(history, run_id)
    spec = _spec(spec_path, specs_dir, run.crawl)
    config = stage.config
    with aws_errors(stage.name, f"re-extract run {run_id}"):
        services = Services(
            tuning=dataclasses.replace(Tuning(), urls_per_message=config.urls_per_message),
            ledger=DynamoRunLedger(config.ledger_table),
            frontier=DynamoFrontier(config.ledger_table, ttl_days=config.claim_ttl_days),
            queue=SqsQueue(stage.queue_url(config.queue_name), urls_per_message=config.urls_per_message),
            objects=S3Objects(stage.bucket),
            records=DynamoRecords(config.records_table) if spec.output.records_table else None,
            specs_dir=spec_path.parent if spec_path is not None else specs_dir,
            finalize_later=_never,
            continue_start=_never,
        )
        yield Opened(run, spec, services)


def reextract_stage(
    stage: Stage, run_id: str, spec_path: Path | None, specs_dir: Path, *, force: bool = False
) -> Reextracted:
    """Re-extract a run of a deployed stage, reading its archive and writing its output with your credentials
    (refused when the new records would fail their checks unless ``force``)."""
    with _staged(stage, run_id, spec_path, specs_dir) as (run, spec, services):
        done = reextract_run(run.crawl, run_id, services, spec, force=force)
        if done.summary.records_total:
            copy_again(stage, spec, run_id)
        return done


def project_stage(stage: Stage, run_id: str, spec_path: Path | None, specs_dir: Path) -> Projection:
    """What re-extracting a run of a deployed stage would make of its records, nothing written."""
    with _staged(stage, run_id, spec_path, specs_dir) as (run, spec, services):
        return project_reextraction(run.crawl, run_id, services, spec)


def copy_again(stage: Stage, spec: CrawlSpec, run_id: str) -> CopyState:
    """The run's Parquet copy made again from its rebuilt records, as the finalizer makes it: the old copy's
    files deleted first (an UNLOAD writes only into an empty folder), then a new generation started."""
    s3, prefix = client("s3"), parquet_prefix(spec.name, run_id)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stage.bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:  # a page lists at most 1,000 keys, what one delete takes
            s3.delete_objects(Bucket=stage.bucket, Delete={"Objects": keys, "Quiet": True})
    engine = AthenaQueries(stage.config.parquet_workgroup, stage.config.glue_database)
    now = SYSTEM_CLOCK.now()
    generation = f"reextract-{now.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"
    return start_copy(engine, S3Objects(stage.bucket), spec, stage.bucket, run_id, now=now, generation=generation)


def report(done: Reextracted) -> str:
    """What a person reads: what was rebuilt, from where, what is missing, and the verdict now."""
    summary = done.summary
    section = summary.reextracted or Reextraction(at="", spec_digest="")
    records, verdict = summary.records or RecordCounts(), summary.verdict
    alerts = ", ".join(a.check for a in verdict.alerts)
    lines = [
        f"run {done.run_id} of {done.crawl}: {section.pages} page(s) re-extracted from the archive "
        f"(responses of run(s) {', '.join(section.from_runs) or 'none'}) in {done.seconds:.1f} s, "
        "no request sent, no link followed",
        f"  records  {records.total} in the output (new {records.new}, "
        f"changed {records.changed}, unchanged {records.unchanged})",
        f"  verdict  {'healthy' if verdict.healthy else f'UNHEALTHY ({alerts})'}",
        f"  spec     {section.previous_spec_digest} -> {section.spec_digest} (the next run reuses them)",
    ]
    if section.missing_archive:
        named = "; ".join(f"{m.url}: {m.reason}" for m in section.missing_named[:3])
        lines.append(
            f"  missing  {section.missing_archive} page(s) without an archived response kept their records "
            f"(e.g. {named})"
        )
    if section.refused:
        lines.append(f"  refused  {section.refused} page(s) extraction refused kept their records")
    lines.append(f"  output   {summary.outputs.records if summary.outputs is not None else '-'}")
    return "\n".join(lines)

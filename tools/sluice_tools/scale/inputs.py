"""What the model plays with: the stack's own settings and the figures `make cost` and `make bench` measured.

Nothing here is retyped: the stack's settings come from ``infra.config`` (the same
:class:`~infra.config.StackConfig` the CDK app deploys), the spec's politeness defaults from the spec
model, the fan-out's send sizes from the scheduler's code, and every per-page figure from the files
`make cost` (``bench/results/cost-latest.json``) and `make bench` (``bench/results/latest.json``)
write. A figure missing from those files is an error naming the file and the field.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.config import DEFAULT, StackConfig

from sluice.adapters.aws.queue import SqsQueue
from sluice.pipeline.start.fanout import CHUNK
from sluice.spec.models import Politeness
from sluice_tools.meter.fit import slope, small_for
from sluice_tools.meter.prices import s3_request_class
from sluice_tools.scale.handler_memory import HANDLER_FILE, HANDLERS

ROOT = Path(__file__).resolve().parents[3]
COST_FILE = ROOT / "bench" / "results" / "cost-latest.json"
BENCH_FILE = ROOT / "bench" / "results" / "latest.json"
RESULTS = ROOT / "bench" / "results"
FINALIZE_GLOB = "finalize-synthetic-*.json"
"""`python -m bench.finalize_scale --synthetic N`'s results: shard tasks each in a fresh process, as on Lambda."""
FINALIZE_TASK_BASE_MB = 90.0
"""A fresh interpreter with the pipeline imported, before a finalize shard task's work: ``BASELINE_MB`` of
``bench/finalize_scale.py``, which docs/benchmarks.md's "Finalizing in shards" subtracts the same way."""
COST_SCENARIO = "demo crawl, first run"
"""The `make cost` run whose calls per page the model uses: a first run, every page fetched (the dearer night)."""

# Knobs of the sharded finalizer and the capped fan-out (issue 17, items 1 and 2) that this branch's
# StackConfig may not have yet: read from the config when it has them, else these defaults (the lead
# wires the real fields at merge; the names are the ones those branches use).
FINALIZE_SHARD_PAGES = 50_000
FINALIZER_SHARD_MAX_CONCURRENCY = 16
HOST_BACKLOG_MESSAGES = 20

AWS_CALL_S = 0.010
"""Stated, as bench/cost_report.py states it: one DynamoDB, S3 or SQS call from Lambda in the same region."""
SEQUENTIAL_CALLS_PER_BATCH = 14
"""As bench/cost_report.py counts them: the calls a batch makes one after another."""
S3_BYTES_PER_S = 100 * 1024 * 1024
"""Stated, as bench/cost_report.py states it: what one finalizer moves to and from S3."""
COLD_START_S = 1.0
"""Stated: a fresh invocation's start (the fan-out's continuation, a finalize shard's first)."""
COMBINE_BASE_S = 2.0
"""Stated: the combine step's fixed work (manifest, summary, metrics) besides reading the shard results."""


class InputFileError(ValueError):
    """A measured-figures file is missing, or lacks a field the model needs."""


@dataclass(frozen=True, slots=True)
class Stack:
    """The deployed stack's settings the model plays (all from :class:`StackConfig` but the three knobs noted)."""

    fetcher_max_concurrency: int
    batch_size: int
    urls_per_message: int
    pack_receives: int
    fetcher_timeout_s: float
    fetcher_memory_mb: int
    scheduler_timeout_s: float
    scheduler_memory_mb: int
    finalizer_timeout_s: float
    finalizer_memory_mb: int
    run_deadline_s: float
    sweep_s: float
    finalize_shard_pages: int
    finalizer_shard_max_concurrency: int
    host_backlog_messages: int
    send_chunk_tasks: int
    send_requests_in_flight: int
    aws_call_s: float = AWS_CALL_S
    sequential_calls_per_batch: int = SEQUENTIAL_CALLS_PER_BATCH


def stack_settings(config: StackConfig = DEFAULT) -> Stack:
    """The model's view of ``config``: its own fields, and the fan-out's send sizes from the scheduler's code."""
    senders = inspect.signature(SqsQueue.__init__).parameters["senders"].default
    return Stack(
        fetcher_max_concurrency=config.fetcher_max_concurrency,
        batch_size=config.batch_size,
        urls_per_message=config.urls_per_message,
        pack_receives=config.pack_receives,
        fetcher_timeout_s=config.fetcher.timeout_s,
        fetcher_memory_mb=config.fetcher.memory_mb,
        scheduler_timeout_s=config.scheduler.timeout_s,
        scheduler_memory_mb=config.scheduler.memory_mb,
        finalizer_timeout_s=config.finalizer.timeout_s,
        finalizer_memory_mb=config.finalizer.memory_mb,
        run_deadline_s=config.run_deadline_hours * 3600.0,
        sweep_s=config.sweep_minutes * 60.0,
        # Not in StackConfig on this branch yet (items 1 and 2 add them): read when there, else the default.
        finalize_shard_pages=int(getattr(config, "finalize_shard_pages", FINALIZE_SHARD_PAGES)),
        finalizer_shard_max_concurrency=int(
            getattr(config, "finalizer_shard_max_concurrency", FINALIZER_SHARD_MAX_CONCURRENCY)
        ),
        host_backlog_messages=int(getattr(config, "host_backlog_messages", HOST_BACKLOG_MESSAGES)),
        send_chunk_tasks=CHUNK,
        send_requests_in_flight=int(senders),
    )


@dataclass(frozen=True, slots=True)
class Site:
    """How the target hosts answer, and the spec's politeness towards them."""

    latency_s: float
    concurrency: int
    """The spec's requests in flight per invocation."""
    concurrency_per_domain: int
    min_delay_s: float = 0.0

    @property
    def host_rate(self) -> float:
        """Pages a second one host allows: its cap over its latency, or one per min delay if that is slower."""
        rate = self.concurrency_per_domain / self.latency_s
        return min(rate, 1.0 / self.min_delay_s) if self.min_delay_s > 0 else rate


def default_site(latency_s: float) -> Site:
    """The spec's politeness defaults (``sluice.spec.models.Politeness``) at a site latency."""
    fields = Politeness.model_fields
    return Site(
        latency_s=latency_s,
        concurrency=int(fields["concurrency"].default),
        concurrency_per_domain=int(fields["concurrency_per_domain"].default),
        min_delay_s=float(fields["min_delay_seconds"].default),
    )


@dataclass(frozen=True, slots=True)
class Measured:
    """Per-page figures from `make cost` and `make bench`, and the files and runs they come from."""

    write_units: float
    read_units: float
    s3_puts: float
    s3_gets: float
    sqs_requests: float
    log_bytes: float
    cpu_s: float
    """CPU a page costs the fetcher (``sluice run``'s whole pipeline, first run, on this machine)."""
    base_rss_mb: dict[str, float]
    """Each function's base memory (``fetcher``, ``scheduler``, ``finalizer``): the higher of the engine's peak RSS
    (fetch and extract at the spec's concurrency, no local store) and that handler's RSS once imported with its
    AWS clients built (``sluice_tools.scale.handler_memory``)."""
    finalize_s: float
    """The finalizer's own time a page (counting, digests, copying; local files)."""
    finalize_bytes: float
    """Bytes a page the finalizer reads and writes (moved through S3 at S3_BYTES_PER_S on AWS)."""
    finalize_mb: float
    """Memory a page of its shard a finalize task holds over the interpreter's: the worst shard task's peak RSS of
    the largest synthetic sharded finalize, less :data:`FINALIZE_TASK_BASE_MB`, over its shard's pages."""
    site_latency_s: float
    """The site latency `make cost` priced Lambda at."""
    sources: dict[str, str]
    run_s3_puts: float = 0.0
    """S3 PUT-class requests a run makes whatever its size (the intercept of the two sizes `make cost` ran)."""
    run_s3_gets: float = 0.0
    """S3 GET-class requests a run makes whatever its size."""


def _get(data: Any, path: str, file: Path) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            raise InputFileError(f"{file.name}: no {path!r} (rerun the command that writes it)")
        data = data[part]
    return data


def _shown(file: Path) -> str:
    """A results file as the docs name it: relative to the repository (never a path of this machine)."""
    return str(file.relative_to(ROOT)) if file.is_relative_to(ROOT) else file.name


def _read(file: Path) -> dict[str, Any]:
    if not file.exists():
        raise InputFileError(f"{file} is missing: run `make cost` and `make bench` first")
    data = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise InputFileError(f"{file.name}: expected a JSON object")
    return data


def _s3_class(calls: dict[str, Any], wanted: str) -> float:
    """A run's S3 requests of one price class (``sluice_tools.meter.prices.s3_request_class``, as `make cost`
    prices them): PUT-class is PUT, COPY, POST and LIST (multipart uploads included), GET-class GET and HEAD."""
    return float(sum(n for op, n in calls.items() if op.startswith("s3.") and s3_request_class(op[3:]) == wanted))


def _largest_finalize(results: Path) -> Path:
    files = sorted(results.glob(FINALIZE_GLOB))
    if not files:
        raise InputFileError(
            f"no {FINALIZE_GLOB} in {_shown(results)}: run `python -m bench.finalize_scale --synthetic N`"
        )
    return max(files, key=lambda f: int(_get(_read(f), "first.pages", f)))


def finalize_task_mb(finalize_file: Path) -> tuple[float, str]:
    """Memory a page of its shard a finalize shard task holds, and where it came from: the worst task (peak RSS,
    first run or nightly, any phase) of a synthetic sharded finalize, less the interpreter's, over its shard's
    pages. Not the local bench's whole-finalize RSS rise, which stays flat whatever the run's size."""
    data = _read(finalize_file)
    first = _get(data, "first", finalize_file)
    pages, shards = float(_get(first, "pages", finalize_file)), int(_get(first, "shards", finalize_file))
    phases = [p for run in ("first", "nightly") if run in data for p in _get(data[run], "phases", finalize_file)]
    if not phases or shards < 1:
        raise InputFileError(f"{finalize_file.name}: no shard phases")
    worst = max(phases, key=lambda p: float(p["peak_rss_mb"]))
    shard_pages = pages / shards
    per_page = (float(worst["peak_rss_mb"]) - FINALIZE_TASK_BASE_MB) / shard_pages
    if per_page <= 0:
        raise InputFileError(f"{finalize_file.name}: a shard task's peak is not above the interpreter's")
    source = (
        f"{_shown(finalize_file)} ({data.get('date', '?')}, `{data.get('command', 'bench.finalize_scale')}`): worst"
        f" shard task {float(worst['peak_rss_mb']):.0f} MB ({worst['phase']}) at {shard_pages:,.0f} pages a shard,"
        f" less the interpreter's ~{FINALIZE_TASK_BASE_MB:.0f} MB"
    )
    return per_page, source


def measured(
    cost_file: Path = COST_FILE,
    bench_file: Path = BENCH_FILE,
    scenario: str = COST_SCENARIO,
    finalize_file: Path | None = None,
    handler_file: Path = HANDLER_FILE,
) -> Measured:
    """The per-page figures, read from the two results files.

    A page's calls are the slope between `make cost`'s run and its smaller run of the same scenario (as
    ``bench/cost_report.per_million`` prices them): a run's fixed calls (the finalizer's shard objects, the
    manifest and summary, robots.txt, the Parquet copy's state) are not a page's, and the model plays the
    finalizer's shards itself. A report without the smaller run divides its one run by its pages."""
    cost, bench = _read(cost_file), _read(bench_file)
    runs = [s for s in _get(cost, "scenarios", cost_file) if s.get("label") == scenario]
    if not runs:
        raise InputFileError(f"{cost_file.name}: no scenario {scenario!r}")
    run = runs[0]
    pages = float(_get(run, "pages", cost_file))
    small = small_for(cost, scenario, below=pages)

    def per_page(of: Callable[[dict[str, Any]], Any]) -> float:
        if small is None:
            return float(of(run)) / pages
        found = slope(float(small["pages"]), float(of(small)), pages, float(of(run)), what=f"{cost_file.name} figure")
        if found < 0:
            raise InputFileError(
                f"{cost_file.name}: a figure falls from the smaller run to the larger (a negative slope)"
            )
        return found

    def per_run(of: Callable[[dict[str, Any]], Any]) -> float:
        return max(0.0, float(of(run)) - per_page(of) * pages)

    def calls(s: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = _get(s, "calls", cost_file)
        return found

    calls(run)  # a report without its calls is named before the bench file is read
    pipeline = _get(bench, "pipeline", bench_file)
    firsts = [p for p in pipeline if p.get("client") == "pipeline" and p.get("variant") == "first"]
    if not firsts:
        raise InputFileError(f"{bench_file.name}: no pipeline first run")
    first = max(firsts, key=lambda p: p["pages_ok"])
    # A fetcher invocation fetches and extracts one batch at the spec's concurrency: the engine's process, whose
    # memory does not grow with the run. Not `sluice run`'s: that process also holds the local store, the local
    # finalize and (its nightly variant) the first run's peak before it.
    engines = [p for p in pipeline if p.get("client") == "sluice" and p.get("variant") == "default"]
    if not engines:
        raise InputFileError(f"{bench_file.name}: no engine run (client 'sluice', variant 'default')")
    engine = max(engines, key=lambda p: p["pages_ok"])
    finals = _get(bench, "finalizer", bench_file)
    biggest = max(finals, key=int)
    final = _get(finals, f"{biggest}.first", bench_file)
    final_pages = float(final["pages"])
    finalize_mb, finalize_source = finalize_task_mb(finalize_file or _largest_finalize(RESULTS))
    handlers = _read(handler_file)
    handler_rss = _get(handlers, "peak_rss_mb", handler_file)
    engine_mb = float(engine["peak_rss_mb"])
    base = {name: max(engine_mb, float(_get(handler_rss, name, handler_file))) for name in HANDLERS}
    slope_note = "" if small is None else f", slope from {int(small['pages']):,} to {int(pages):,} pages"
    return Measured(
        write_units=per_page(lambda s: _get(s, "dynamodb.wru", cost_file)),
        read_units=per_page(lambda s: _get(s, "dynamodb.rru", cost_file)),
        s3_puts=per_page(lambda s: _s3_class(calls(s), "put")),
        s3_gets=per_page(lambda s: _s3_class(calls(s), "get")),
        sqs_requests=per_page(lambda s: _get(s, "sqs_billed_requests", cost_file)),
        log_bytes=per_page(lambda s: _get(s, "log_bytes", cost_file)),
        cpu_s=float(first["cpu_s"]) / float(first["pages_ok"]),
        base_rss_mb=base,
        finalize_s=float(final["ms_per_page"]) / 1000,
        finalize_bytes=float(final["bytes_read_per_page"]) + float(final["bytes_written_per_page"]),
        finalize_mb=finalize_mb,
        site_latency_s=float(_get(cost, "site_latency_ms", cost_file)) / 1000,
        run_s3_puts=per_run(lambda s: _s3_class(calls(s), "put")),
        run_s3_gets=per_run(lambda s: _s3_class(calls(s), "get")),
        sources={
            "calls, units and bytes a page": f"{_shown(cost_file)} ({_get(cost, 'when', cost_file)}, "
            f"{scenario!r}{slope_note})",
            "CPU and memory a page": f"{_shown(bench_file)} ({_get(bench, 'started', bench_file)}, "
            f"pipeline first run of {int(first['pages_ok']):,} pages; finalizer time and bytes at"
            f" {int(final_pages):,} pages)",
            "finalizer memory a page": finalize_source,
            "process memory": f"each function's base, the higher of the peak RSS of `make bench`'s engine run (fetch"
            f" and extract, no local store) of {int(engine['pages_ok']):,} pages, {engine_mb:.0f} MB,"
            f" {_shown(bench_file)} ({_get(bench, 'started', bench_file)}), and its handler's RSS once imported with"
            f" its AWS clients built, {_shown(handler_file)} ({_get(handlers, 'date', handler_file)},"
            f" `{_get(handlers, 'command', handler_file)}`)",
        },
    )

"""Where a run's objects live: the same keys in S3 and in a local state folder.

- ``work/crawl=NAME/run=ID/``: working data the fetchers write while the run is in flight: one
  part of records per batch (``parts/``) and the frontier set of seed URL hashes. A lifecycle
  rule expires it.
- ``runs/crawl=NAME/run=ID/``: the run's output: ``records/part-NNNNN.jsonl`` (each record once,
  every line carrying its ``_key``; a spec with ``types`` writes ``records/type=TYPE/part-NNNNN.jsonl``,
  its lines carrying ``_type`` too, file numbers running across types), ``pages.index`` (where each
  page's records are, for the next run's reused pages), ``manifest.json`` and ``summary.json``.
  Partitioned by crawl and run, so Athena/Glue can project partitions without a crawler.
- ``archive/crawl=NAME/run=ID/FILE.warc.gz``: a spec with ``output.archive`` keeps every response the
  run fetched as WARC, one file per batch (each record its own gzip member, so one range read gives one
  whole record). Kept as long as the outputs, aging with them: ``sluice reextract`` reads it.
"""

from __future__ import annotations

import hashlib

WORK_PREFIX = "work/"
RUNS_PREFIX = "runs/"
SEEDS_PREFIX = "seeds/"
ARCHIVE_PREFIX = "archive/"


def seeds_key(crawl: str, name: str) -> str:
    """A crawl's seed file (``seeds.file``): uploaded to the bucket when deployed, copied there by local runs."""
    return f"{SEEDS_PREFIX}{crawl}/{name}"


def work_prefix(crawl: str, run_id: str) -> str:
    return f"{WORK_PREFIX}crawl={crawl}/run={run_id}/"


def crawl_prefix(crawl: str) -> str:
    """Every run's output of one crawl: what its query table reads (partitions ``crawl``, ``run``)."""
    return f"{RUNS_PREFIX}crawl={crawl}/"


def crawl_of_prefix(prefix: str) -> str | None:
    """The crawl a :func:`crawl_prefix` names (``runs/crawl=NAME/``), or None for any other key."""
    head = f"{RUNS_PREFIX}crawl="
    if not prefix.startswith(head) or not prefix.endswith("/"):
        return None
    crawl = prefix[len(head) : -1]
    return crawl if crawl and "/" not in crawl else None


def run_prefix(crawl: str, run_id: str) -> str:
    return f"{crawl_prefix(crawl)}run={run_id}/"


def part_key(crawl: str, run_id: str, part_id: str) -> str:
    """One batch's records (``part_id`` is unique per invocation: a retry never overwrites a part in use)."""
    return f"{work_prefix(crawl, run_id)}parts/{part_id}.jsonl"


def backlog_key(crawl: str, run_id: str, chunk: str) -> str:
    """One chunk of a host's backlog (``HOST_ID/SEQ``): the seeds past the host's cap, sent by the fetcher that
    visits the task pointing at it (:mod:`sluice.pipeline.start.backlog`)."""
    return f"{work_prefix(crawl, run_id)}backlog/{chunk}.jsonl"


def backlog_cursor_key(crawl: str, run_id: str, offset: int) -> str:
    """What a fan-out handing over at ``offset`` leaves its continuation: each host's count, held task and buffer."""
    return f"{work_prefix(crawl, run_id)}backlog/cursor-{offset:012d}.json"


def archive_key(crawl: str, run_id: str, file_id: str) -> str:
    """One batch's responses as WARC (``file_id`` unique per invocation, as a part's is)."""
    return f"{ARCHIVE_PREFIX}crawl={crawl}/run={run_id}/{file_id}.warc.gz"


def robots_key(crawl: str, run_id: str, robots_url: str) -> str:
    """An origin's robots.txt as the run's first fetcher of it got it (every fetcher of the run reads it)."""
    name = hashlib.sha256(robots_url.encode()).hexdigest()[:32]
    return f"{work_prefix(crawl, run_id)}robots/{name}.json"


def sitemap_seeds_key(crawl: str, run_id: str) -> str:
    """The page URLs (and lastmods) the run's sitemaps listed, read once at its start: every continuation reads them."""
    return f"{work_prefix(crawl, run_id)}sitemaps/urls.tsv"


def sitemap_report_key(crawl: str, run_id: str) -> str:
    """What reading the run's sitemaps found and refused: the summary's ``sitemaps`` section."""
    return f"{work_prefix(crawl, run_id)}sitemaps/report.json"


def finalize_prefix(crawl: str, run_id: str, attempt: str) -> str:
    """One finalizing attempt's shard results (scan, keys, write), each rewritten whole by a retried shard."""
    return f"{work_prefix(crawl, run_id)}finalize/{attempt}/"


def is_attempt_scratch(key: str) -> bool:
    """True for a key under one finalizing attempt's folder (:func:`finalize_prefix`): read only by the attempt
    that wrote it (a retried or resumed finalize starts an attempt of its own, under a new folder)."""
    if not key.startswith(WORK_PREFIX):
        return False
    _, found, rest = key.partition("/finalize/")
    return bool(found) and "/" in rest


def frontier_key(crawl: str, run_id: str) -> str:
    """The sorted 64-bit hashes of the run's seed URLs: fetchers never claim a link that is a seed."""
    return f"{work_prefix(crawl, run_id)}frontier.bin"


def records_prefix(crawl: str, run_id: str) -> str:
    return f"{run_prefix(crawl, run_id)}records/"


def records_file(crawl: str, run_id: str, number: int, type_: str | None = None) -> str:
    """An output file; a spec with ``types`` writes each type's under ``records/type=TYPE/`` (numbered across types).

    ``number`` keeps the finalize shard that wrote the file in its top 16 bits: ``part-SSSSS-NNNNN.jsonl``."""
    folder = records_prefix(crawl, run_id) if type_ is None else f"{records_prefix(crawl, run_id)}type={type_}/"
    return f"{folder}part-{number >> 16:05d}-{number & 0xFFFF:05d}.jsonl"


def parquet_prefix(crawl: str, run_id: str) -> str:
    """The run's records again as Parquet, beside the JSON Lines (``parquet/records.parquet``, or one per
    ``type=TYPE/``), and ``parquet/done.json`` written last: a query reads them only once it is there."""
    return f"{run_prefix(crawl, run_id)}parquet/"


def index_key(crawl: str, run_id: str) -> str:
    return f"{run_prefix(crawl, run_id)}pages.index"


def manifest_key(crawl: str, run_id: str) -> str:
    return f"{run_prefix(crawl, run_id)}manifest.json"


def summary_key(crawl: str, run_id: str) -> str:
    return f"{run_prefix(crawl, run_id)}summary.json"

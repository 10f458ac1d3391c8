"""The Parquet copy's Athena scan, for `make cost`: what each ``UNLOAD`` of a run reads, measured, and its price.

moto records the finalizer's ``UNLOAD``s and runs no SQL, so the scan is measured where Athena would read it:
the bytes of the run's JSON Lines objects under each copied table's location (``records/``, or a type's
``records/type=TYPE/``), as the emulated run left them in the bucket. Athena reads every byte of a JSON file
whatever columns a query names, skips objects whose names start with ``_`` or ``.``, and bills each query's
bytes rounded up to the next MB with a 10 MB minimum, at the price list's ``athena_per_tb_scanned``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sluice.domain.cost import GB, US_EAST_1, PriceList
from sluice.domain.layout import records_prefix
from sluice.pipeline.finalize.columnar import unloads
from sluice.spec import CrawlSpec
from sluice_tools.emulate import state

MB = 1024**2
TB = 1024 * GB
"""Binary, as AWS bills data (``sluice.domain.cost.GB``)."""
MIN_BILLED_BYTES = 10 * MB
"""Athena bills a query at least 10 MB."""
MILLION = 1_000_000


def scanned_bytes(state_dir: Path, spec: CrawlSpec, run_id: str) -> list[dict[str, Any]]:
    """Each ``UNLOAD`` the finalizer starts for the run (one a table) and the bytes of JSON Lines it reads."""
    queries = []
    for unload in unloads(spec, "bucket", run_id):
        prefix = records_prefix(spec.name, run_id) + (f"type={unload.kind}/" if unload.kind is not None else "")
        folder = state.object_path(state_dir, prefix)
        files = [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(("_", "."))]
        queries.append({"table": unload.table, "scanned_bytes": sum(p.stat().st_size for p in files)})
    return queries


def billed_bytes(scanned: float) -> int:
    """What Athena bills one query: rounded up to the next MB, at least 10 MB."""
    return max(MIN_BILLED_BYTES, math.ceil(scanned / MB) * MB)


def price(queries: list[dict[str, Any]], scale: float = 1.0, prices: PriceList = US_EAST_1) -> float:
    """Dollars for the queries, each query's bytes scaled by ``scale`` first (a run of a million pages scans
    ``MILLION / pages`` times as much; the 10 MB minimum applies to the scaled query, as Athena would bill it)."""
    billed = sum(billed_bytes(q["scanned_bytes"] * scale) for q in queries)
    return billed / TB * prices.athena_per_tb_scanned


def per_million(scenario: dict[str, Any], prices: PriceList = US_EAST_1) -> float:
    """The copy's Athena scan a million pages, from a `make cost` scenario (0 for a report from before it), over
    the pages of the run its scan was measured on."""
    copy = scenario.get("parquet_copy", {})
    queries = copy.get("queries", [])
    return price(queries, MILLION / max(1, copy.get("pages", scenario["pages"])), prices) if queries else 0.0


def at_pages(large: dict[str, Any], small: dict[str, Any] | None, pages: int) -> list[dict[str, Any]]:
    """The copy's queries of a run of ``pages`` pages: each table's bytes a page (the slope between the two measured
    sizes, or the one run's bytes a page without a smaller one) times ``pages``, plus the bytes it reads whatever
    the run's size (the intercept, never below nothing). Billed as Athena would bill a run that size
    (:func:`price`), not scaled up from the 10 MB a small run is billed."""
    queries = large.get("parquet_copy", {}).get("queries", [])
    large_pages = large.get("parquet_copy", {}).get("pages", large["pages"])
    measured = {} if small is None else {q["table"]: q["scanned_bytes"] for q in small["parquet_copy"]["queries"]}
    small_pages = 0 if small is None else small["parquet_copy"].get("pages", small["pages"])
    out = []
    for query in queries:
        a_page = (query["scanned_bytes"] - measured.get(query["table"], 0)) / max(1, large_pages - small_pages)
        fixed = query["scanned_bytes"] - a_page * large_pages
        out.append({"table": query["table"], "scanned_bytes": max(0.0, fixed + a_page * pages)})
    return out

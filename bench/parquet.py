"""JSON Lines against Parquet on a 10,000-page demo run: bytes on disk, DuckDB time, and what Athena would scan.

    .venv/bin/python -m bench.parquet [--pages 10000] [--rounds 3]

Two nightly runs of crawls/demo-books.yaml (``--pages`` listing pages of 20 books each; 1% of the
books re-priced between them) on ``sluice run``, which writes each run's Parquet copy after
finalizing. Then, per format, the three queries of docs/querying.md (a run's records, what changed
between the runs, null rate per field) through `sluice query`'s own views, the best of ``--rounds``
timed, and the bytes Athena would scan: every byte of the runs' JSON Lines files, or, for Parquet,
the compressed column chunks of the columns the query names (each file's footer besides), read
from the files' own metadata. Results go to bench/results/parquet-latest.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from sluice.spec import load_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.ops.query import PARQUET_DONE, crawl_tables, run_query
from sluice_tools.runner.local import LocalFleet

RESULTS = Path("bench/results")
SPEC = Path("crawls/demo-books.yaml")
FIELDS = ("title", "url", "price", "rating", "availability")
QUERIES = {
    "a run's records": (
        """SELECT "_key", title, price, rating, availability, "_page" FROM demo_books
        WHERE run = '{new}' ORDER BY "_key" LIMIT 100""",
        ("_key", "title", "price", "rating", "availability", "_page"),
        1,
    ),
    "what changed": (
        """WITH old_run AS (SELECT * FROM demo_books WHERE run = '{old}'),
        new_run AS (SELECT * FROM demo_books WHERE run = '{new}')
        SELECT coalesce(new_run."_key", old_run."_key") AS "_key",
          CASE WHEN old_run."_key" IS NULL THEN 'new' WHEN new_run."_key" IS NULL THEN 'gone' ELSE 'changed' END
            AS change,
          old_run.price AS old_price, new_run.price AS new_price
        FROM old_run FULL OUTER JOIN new_run ON old_run."_key" = new_run."_key"
        WHERE old_run."_key" IS NULL OR new_run."_key" IS NULL
          OR old_run.title IS DISTINCT FROM new_run.title OR old_run.url IS DISTINCT FROM new_run.url
          OR old_run.price IS DISTINCT FROM new_run.price OR old_run.rating IS DISTINCT FROM new_run.rating
          OR old_run.availability IS DISTINCT FROM new_run.availability
        ORDER BY change, "_key\"""",
        ("_key", *FIELDS),
        2,
    ),
    "null rate per field": (
        "SELECT run, count(*) AS records, {rates} FROM demo_books WHERE run IN ('{old}', '{new}') "
        "GROUP BY run ORDER BY run",
        FIELDS,
        2,
    ),
}


def _folder_bytes(folder: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in folder.glob(pattern))


def _column_bytes(files: list[Path], columns: tuple[str, ...]) -> int:
    """What a columnar reader fetches: the named columns' compressed chunks, and each file's footer."""
    total = 0
    for path in files:
        meta = duckdb.execute(
            "SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata(?) GROUP BY 1", [str(path)]
        ).fetchall()
        total += sum(int(size) for name, size in meta if name in columns)
        with path.open("rb") as handle:  # the footer: its length is in the file's last 8 bytes (then "PAR1")
            handle.seek(-8, 2)
            total += int.from_bytes(handle.read(4), "little") + 8
    return total


def _time(sql: str, state: Path, specs: Path, rounds: int) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(rounds):
        tables = crawl_tables(state, specs)
        started = time.perf_counter()
        _, found = run_query(sql, tables)
        best = min(best, time.perf_counter() - started)
        rows = len(found)
    return best, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sluice-parquet-"))
    try:
        specs, state = work / "crawls", work / "state"
        specs.mkdir()
        runs = []
        with running_demo_site(books=args.pages * 20, changed_fraction=0.01) as site:
            text = SPEC.read_text(encoding="utf-8").replace("http://127.0.0.1:8710", site.base_url)
            text = text.replace("stop: 50}", f"stop: {args.pages}}}").replace("max_pages: 500", "max_pages: 20000")
            (specs / "demo-books.yaml").write_text(text, encoding="utf-8")
            spec = load_spec(specs / "demo-books.yaml")
            fleet = LocalFleet(specs, state, workers=4, allow_loopback=True, say=lambda _: None)
            for version in (0, 1):
                site.set_catalogue(books=args.pages * 20, version=version, changed_fraction=0.01)
                started = time.perf_counter()
                run = fleet.run(spec)
                runs.append((run, time.perf_counter() - started))
        old, new = runs[0][0].run_id, runs[1][0].run_id
        objects = state / "objects" / "runs" / "crawl=demo-books"
        sizes = {
            r.run_id: {
                "records": r.summary.to_json()["records"]["total"],
                "pages": r.summary.to_json()["pages"]["fetched"] + r.summary.to_json()["pages"]["not_modified"],
                "jsonl_bytes": _folder_bytes(objects / f"run={r.run_id}", "records/part-*.jsonl"),
                "parquet_bytes": _folder_bytes(objects / f"run={r.run_id}", "parquet/records.parquet"),
                "run_seconds": round(seconds, 1),
            }
            for r, seconds in runs
        }
        results: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "runs": sizes}
        queries: dict[str, Any] = {}
        for name, (template, columns, run_count) in QUERIES.items():
            rates = ", ".join(f"round(1 - CAST(count({f}) AS double) / count(*), 4) AS {f}" for f in FIELDS)
            sql = template.format(old=old, new=new, rates=rates)
            named = [new] if run_count == 1 else [old, new]
            parquet_s, parquet_rows = _time(sql, state, specs, args.rounds)
            parquet_files = [objects / f"run={r}" / "parquet" / "records.parquet" for r in named]
            hidden = [objects / f"run={r}" / "parquet" / PARQUET_DONE for r in (old, new)]
            for marker in hidden:
                marker.rename(marker.with_suffix(".off"))
            try:
                jsonl_s, jsonl_rows = _time(sql, state, specs, args.rounds)
            finally:
                for marker in hidden:
                    marker.with_suffix(".off").rename(marker)
            assert parquet_rows == jsonl_rows, (name, parquet_rows, jsonl_rows)
            queries[name] = {
                "rows": parquet_rows,
                "duckdb_jsonl_s": round(jsonl_s, 3),
                "duckdb_parquet_s": round(parquet_s, 3),
                "athena_scan_jsonl_bytes": sum(sizes[r]["jsonl_bytes"] for r in named),
                "athena_scan_parquet_bytes": _column_bytes(parquet_files, columns),
            }
        results["queries"] = queries
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "parquet-latest.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What a finalizer wrote for synthetic runs, in a form two finalizers can be compared by.

``capture`` finalizes a first run and a nightly run (reused, changed and gone pages, keys two
pages share) on a fresh local store and returns, per run, its summary without what differs from
one finalizing to the next (ids, clocks, the finalizer's own seconds and what they cost) and its
output lines, sorted. ``python -m tests.finalize.golden`` wrote ``golden.json`` with the finalizer
of one process per run, before finalizing was sharded; the tests compare the sharded one with it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from sluice.adapters.local import LocalStore
from sluice.domain.layout import manifest_key, summary_key
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.services import Services, Tuning
from sluice_tools import synthetic

GOLDEN = Path(__file__).with_name("golden.json")
PAGES = 600
VOLATILE = ("run_id", "started_at", "finalized_at", "finalize_s", "catalog_run", "cost", "previous_run")


def _never(_: dict[str, object]) -> None:
    raise AssertionError("no trigger expected")


def services(store: LocalStore, specs: Path, tuning: Tuning) -> Services:
    return store.services(specs, tuning, finalize_later=_never, continue_start=_never)


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary less what differs between two finalizings of the same results."""
    kept = {k: v for k, v in summary.items() if k not in VOLATILE}
    kept["outputs"] = {k: v for k, v in summary["outputs"].items() if k not in ("records", "files")}
    kept["cost_usage"] = {k: v for k, v in summary["cost"]["usage"]["per_page_work"].items() if k != "lambda_gb_s"}
    return kept


def lines(services: Services, crawl: str, run_id: str) -> dict[str, Any]:
    """The run's output lines, sorted: how many, and their SHA-256 (the golden file stays small); its files."""
    manifest = json.loads(services.objects.get(manifest_key(crawl, run_id)) or b"{}")
    out: list[str] = []
    for file in manifest["files"]:
        out += (services.objects.get(file["key"]) or b"").decode().splitlines()
    joined = "\n".join(sorted(out)).encode()
    return {"count": len(out), "sha256": hashlib.sha256(joined).hexdigest(), "files": len(manifest["files"])}


def capture(folder: Path, tuning: Tuning | None = None, pages: int = PAGES) -> dict[str, Any]:
    specs = folder / "crawls"
    synthetic.write_spec(specs)
    store = LocalStore.open(folder / "state")
    try:
        wired = services(store, specs, tuning or Tuning())
        first = synthetic.write_run(store, pages)
        done = finalize_run(synthetic.CRAWL, first, wired)
        assert done is not None, "the first synthetic run did not finalize"
        nightly = synthetic.write_run(store, pages, night=2, catalog_run=first)
        done = finalize_run(synthetic.CRAWL, nightly, wired)
        assert done is not None, "the nightly synthetic run did not finalize"
        runs = {}
        for name, run_id in (("first", first), ("nightly", nightly)):
            summary = json.loads(wired.objects.get(summary_key(synthetic.CRAWL, run_id)) or b"{}")
            runs[name] = {"summary": stable(summary), "lines": lines(wired, synthetic.CRAWL, run_id)}
        return runs
    finally:
        store.close()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        captured = capture(Path(tmp))
    GOLDEN.write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(
        f"wrote {GOLDEN.name}: " + ", ".join(f"{k} {v['lines']['count']} lines" for k, v in captured.items()),
        file=sys.stderr,
    )

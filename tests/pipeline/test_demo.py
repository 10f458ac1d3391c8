"""`make demo` tells its story: three nights, night 3 broken by the redesign, and night 4's repair from the archive."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sluice.adapters.local import LocalStore
from sluice.domain.layout import summary_key
from sluice_tools.runner.demo import run_demo

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPEC = ROOT / "crawls" / "demo-books.yaml"


def _shape(text: str) -> list[list[str]]:
    """The demo's output as blocks of lines with every number, run id and digest as ``#``: what differs run to run."""
    masked = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}|[0-9a-f]{16}|\d+(\.\d+)?", "#", text.strip())
    return [block.splitlines() for block in re.split(r"\n\s*\n", masked)]


def readme_sample_differs(said: str) -> list[str]:
    """Where the README's sample of `make demo` differs from what the demo said (a README block ending in ``...``
    shows the first lines of its night only)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("demo site serving on ")
    end = readme.index("```", start)
    sample, real = _shape(readme[start:end]), _shape(said)
    if len(sample) != len(real):
        return [f"{len(sample)} blocks in the README, {len(real)} said"]
    differs = []
    for shown, printed in zip(sample, real, strict=True):
        if shown[-1].strip() == "...":
            shown, printed = shown[:-1], printed[: len(shown) - 1]
        differs += [f"README {a!r} / said {b!r}" for a, b in zip(shown, printed, strict=False) if a != b]
        if len(shown) != len(printed):
            differs.append(f"README block {shown[0]!r}: {len(shown)} lines, said {len(printed)}")
    return differs


def test_the_demo_breaks_night_3_and_night_4_repairs_it_from_the_archive_without_a_request(tmp_path: Path) -> None:
    said: list[str] = []
    state = tmp_path / "demo"
    assert run_demo(DEMO_SPEC, state, say=said.append) == 0
    text = "\n".join(said)
    assert "== night 4: the price selector is fixed in the spec" in text
    assert "requests to the demo site during the re-extraction: 0" in text
    assert "50 page(s) re-extracted from the archive" in text
    store = LocalStore.open(state)
    try:
        runs = sorted(store.ledger.recent_runs("demo-books", 10), key=lambda r: r.run_id)
        assert len(runs) == 3
        night3 = runs[-1]
        assert (night3.healthy, night3.records) == (True, 1000)  # the ledger says so too: the next run's catalog
        raw = store.objects.get(summary_key("demo-books", night3.run_id))
        assert raw is not None
        summary = json.loads(raw)
    finally:
        store.close()
    assert summary["records"]["total"] == 1000
    assert summary["verdict"]["healthy"] is True
    assert summary["reextracted"]["pages"] == 50
    assert summary["reextracted"]["missing_archive"] == 0
    assert summary["reextracted"]["from_runs"] == [night3.run_id]
    before = summary["reextracted"]["before"]  # what night 3 said when it ran, kept for its history
    assert before["verdict"]["healthy"] is False
    assert [a["check"] for a in before["verdict"]["alerts"]] == ["records_nonzero", "record_count_drop"]
    assert before["records"]["total"] == 0
    last_row = next(line for line in text.splitlines() if line.startswith("3* "))
    assert last_row.split()[3] == "1000"
    assert last_row.endswith("healthy")
    # The README shows this output: line for line, but for the numbers, ids and digests that differ run to run.
    assert readme_sample_differs(text.replace(str(state), ".sluice/demo")) == []

"""`make demo` tells its story: three nights, night 3 broken by the redesign, and night 4's repair from the archive."""

from __future__ import annotations

import json
from pathlib import Path

from sluice.adapters.local import LocalStore
from sluice.domain.layout import summary_key
from sluice_tools.runner.demo import run_demo

DEMO_SPEC = Path(__file__).resolve().parents[2] / "crawls" / "demo-books.yaml"


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

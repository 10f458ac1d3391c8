"""glibc's malloc keeps a heavy page's freed memory for the next page (extraction.heap), told once a process.

The settings are checked through a stand-in C library (what is called, how often); their effect in a
fresh interpreter, by the minor page faults (``ru_minflt``) a run of 400 KB pages causes: before,
glibc gave each page's ~1.3 MB back to the kernel and the next page faulted it in again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluice.extraction import extract, heap
from sluice.extraction.extract import extract_page
from sluice.spec import CrawlSpec

PAGE_URL = "https://books.toscrape.com/catalogue/category/books_1/page-1.html"

ROOT = Path(__file__).resolve().parents[2]
FEW_FAULTS_A_PAGE = 40
"""Minor page faults a 400 KB page may cause once the heap is tuned (about 1 here; 330-440 before)."""


class FakeGlibc:
    """A C library that records its ``mallopt`` calls; glibc, for it has ``gnu_get_libc_version``."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def gnu_get_libc_version(self) -> bytes:
        return b"2.36"

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return 1


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> FakeGlibc:
    """The heap as a new process finds it (not yet tuned), with :class:`FakeGlibc` for its C library."""
    libc = FakeGlibc()
    monkeypatch.setattr(extract, "_heap_pending", True)
    monkeypatch.setattr(heap, "_tuned", False)
    monkeypatch.setattr(heap, "_own_libc", lambda: libc)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    return libc


def test_extraction_sets_the_trim_and_mmap_thresholds_once_a_process(
    fresh_process: FakeGlibc, spec: CrawlSpec, page: str
) -> None:
    assert fresh_process.calls == []
    for _ in range(3):
        assert len(extract_page(spec, PAGE_URL, page).records) == 20
    settings = [(-1, 8 * 1024 * 1024), (-3, 1024 * 1024)]  # M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
    assert fresh_process.calls == settings
    heap.tune_heap()  # as a worker's start would: nothing more
    assert fresh_process.calls == settings


def test_without_glibc_nothing_is_set_and_nothing_fails(fresh_process: FakeGlibc) -> None:
    class Musl:  # a mallopt whose parameters mean something else, or nothing
        def mallopt(self, parameter: int, value: int) -> int:
            raise AssertionError("called a mallopt that is not glibc's")

    assert heap.apply(Musl()) is False
    assert heap.apply(object()) is False  # macOS: no mallopt at all
    assert heap.apply(None) is False  # no process-wide handle (Windows)
    assert heap.apply(fresh_process) is True


def test_the_operators_own_malloc_settings_are_kept(fresh_process: FakeGlibc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    heap.tune_heap()
    assert fresh_process.calls == []


def _fresh(script: str) -> Any:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("functions", "tools"))}
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        environment.pop(name, None)
    answer = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=100, check=True
    )
    return json.loads(answer.stdout.strip().splitlines()[-1])


_HEAVY_RUN = """
import json, resource
from sluice.extraction.charset import parser_input
from sluice.extraction.extract import extract_page
from sluice.spec import parse_spec
from sluice_tools.demosite.catalogue import Catalogue

DISTINCT, WARM, MEASURED = 8, 16, 40
catalogue = Catalogue(books=DISTINCT * 20, heavy=True)
pages = [catalogue.get(f"/catalogue/page-{n}.html") for n in range(1, DISTINCT + 1)]
spec = parse_spec({
    "name": "heavy", "seeds": ["http://127.0.0.1/catalogue/page-1.html"],
    "extract": {"item": "article.product_pod", "fields": {
        "title": {"selector": "h3 a::attr(title)", "required": True},
        "url": {"selector": "h3 a::attr(href)", "process": ["strip", "absolute_url"]},
        "price": {"selector": "p.price_color::text", "process": ["strip", "price"]},
    }},
})
records = []
def run(count):
    for i in range(count):
        page = pages[i % DISTINCT]
        body = bytes(bytearray(page.body))  # a new body a page, as each comes off the network
        url = f"http://127.0.0.1/catalogue/page-{i % DISTINCT + 1}.html"
        records.append(len(extract_page(spec, url, parser_input(body, page.content_type)).records))
run(WARM)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run(MEASURED)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"bytes": min(len(p.body) for p in pages), "records": sorted(set(records)),
                  "faults_a_page": faults / MEASURED}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and ru_minflt: Linux")
def test_a_run_of_400_kb_pages_faults_in_no_fresh_memory_a_page() -> None:
    measured = _fresh(_HEAVY_RUN)
    assert measured["bytes"] > 380_000
    assert measured["records"] == [20]
    assert measured["faults_a_page"] < FEW_FAULTS_A_PAGE, measured


def test_importing_the_fetcher_loads_neither_ctypes_nor_the_heap_module() -> None:
    """ctypes (~2 ms) and extraction.heap are loaded by the first page's extraction, not by the fetcher's cold start."""
    script = (
        "import json, sys\nimport sluice.handlers.fetcher\n"
        "print(json.dumps([m in sys.modules for m in ('ctypes', 'sluice.extraction.heap')]))"
    )
    assert _fresh(script) == [False, False]

"""Where Sluice's CPU per page goes, stage by stage, measured offline on one rendered demo page.

``python -m bench.breakdown [--json]`` times each step of the engine's per-page path in isolation (no
network): gzip decoding, the body hash, charset decoding, lexbor parsing, and extraction with
and without the field steps, of one page again and again, then of distinct pages in turn as the
engine hands them over (bytes, for UTF-8), where a field's memo of step results hits less.
Subtracting these from a bench run's CPU-ms per page leaves the cost of fetching (httpx, the
transport, asyncio, the engine's bookkeeping).
"""

from __future__ import annotations

import gzip
import json
import sys
import time
import zlib
from collections.abc import Callable
from itertools import cycle
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from bench.client_pipeline import docs_spec
from bench.client_sluice import bench_spec
from bench.common import CLIENT_CORE, RESULT_PREFIX, pin_to_core
from sluice.extraction.charset import decode_html, parser_input
from sluice.extraction.extract import extract_page
from sluice.extraction.limits import check_nesting
from sluice.extraction.urls import LinkJudge, Scope, canonical_link, canonicalize_url
from sluice.fetch.outcomes import content_hash
from sluice.spec import CrawlSpec, parse_spec
from sluice_tools.demosite.catalogue import Catalogue
from sluice_tools.demosite.docs import DocsSite

BASE = "http://127.0.0.1:8710"
PAGE_URL = f"{BASE}/catalogue/page-7.html"
DISTINCT_PAGES = 40


def per_call_us(fn: Callable[[], Any], calls: int = 200, repeats: int = 5) -> float:
    """Best-of-``repeats`` CPU microseconds per call of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6


def variant_spec(steps: dict[str, list[Any]]) -> CrawlSpec:
    """The bench spec with some fields' process steps replaced."""
    data = bench_spec(BASE, 10, 32).model_dump(mode="json", exclude_defaults=False)
    for name, process in steps.items():
        data["extract"]["fields"][name]["process"] = process
    data["extract"]["fields"] = {
        k: {"selector": v["selector"]["source"], "process": v["process"], "required": v["required"]}
        for k, v in data["extract"]["fields"].items()
    }
    return parse_spec(data)


def measure(heavy: bool = False) -> dict[str, float]:
    """Microseconds per page for each stage of the path."""
    page = Catalogue(books=200, heavy=heavy).get("/catalogue/page-7.html")
    assert page is not None
    body, gz = page.body, gzip.compress(page.body, 6, mtime=0)
    html, _ = decode_html(body, page.content_type)
    spec = bench_spec(BASE, 10, 32)
    plain = variant_spec({"url": ["strip"], "price": ["strip"], "rating": ["strip"]})
    no_abs = variant_spec({"url": ["strip"]})
    assert len(extract_page(spec, PAGE_URL, html).records) == 20
    fresh = iter([f"{BASE}/catalogue/page-{n}.html?heavy={heavy}" for n in range(1, 1001)] * 2)  # no cache hits
    # As a run sees pages: each a different one, handed over as the engine hands it (UTF-8 bytes as they came),
    # so a field's memo of step results (extraction/processing.py) hits only on values that recur across cards.
    distinct = Catalogue(books=DISTINCT_PAGES * 20, heavy=heavy)
    served = [distinct.get(f"/catalogue/page-{n}.html") for n in range(1, DISTINCT_PAGES + 1)]
    run = cycle(
        [
            (f"{BASE}/catalogue/page-{n}.html", parser_input(p.body, p.content_type))
            for n, p in enumerate(served, 1)
            if p
        ]
    )
    return {
        "gzip decode": per_call_us(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(gz)),
        "sha256 content hash": per_call_us(lambda: content_hash(body)),
        "charset decode": per_call_us(lambda: decode_html(body, page.content_type)),
        "nesting check (extraction/limits.py)": per_call_us(lambda: check_nesting(html)),
        "lexbor parse": per_call_us(lambda: LexborHTMLParser(html)),
        "extract (whole)": per_call_us(lambda: extract_page(spec, PAGE_URL, html)),
        "extract, no absolute_url step": per_call_us(lambda: extract_page(no_abs, PAGE_URL, html)),
        "extract, only strip steps": per_call_us(lambda: extract_page(plain, PAGE_URL, html)),
        "canonicalize seed URL (frontier)": per_call_us(lambda: canonicalize_url(next(fresh))),
        f"extract, {DISTINCT_PAGES} pages in turn, as the engine": per_call_us(lambda: extract_page(spec, *next(run))),
    }


def measure_links() -> dict[str, float]:
    """Microseconds per link, resolving and canonicalizing every href of a link-heavy docs page.

    Beside Sluice (WHATWG resolution by ada, then string-level canonicalization), the way Scrapy's
    link extractor does the same work: ``urljoin``, ``safe_url_string`` and w3lib's ``canonicalize_url``.
    """
    from urllib.parse import urljoin

    from w3lib.url import canonicalize_url as w3lib_canonicalize
    from w3lib.url import safe_url_string

    docs = DocsSite(pages=2000)
    path = next(p for p in docs.paths() if p.count("/") > 2)
    page = docs.get(path)
    assert page is not None
    base = f"{BASE}{path}"
    hrefs = [a.attrs.get("href") or "" for a in LexborHTMLParser(page.body).css("a[href]")]
    assert len(hrefs) >= 200, len(hrefs)

    scope = Scope.from_spec(docs_spec(BASE, 32))
    known = LinkJudge(scope)
    for href in hrefs:
        known.judge(href, base)

    def sluice() -> None:
        judge = LinkJudge(scope)  # every link seen for the first time
        for href in hrefs:
            judge.judge(href, base)

    def sluice_known() -> None:
        for href in hrefs:
            known.judge(href, base)

    def peer() -> None:
        for href in hrefs:
            url = w3lib_canonicalize(safe_url_string(urljoin(base, href)))
            scope.allows(url)

    return {
        "links on the page": float(len(hrefs)),
        "sluice: resolve + canonicalize + scope, first sight, µs per link": per_call_us(sluice, calls=20) / len(hrefs),
        "sluice: the same, a link seen on an earlier page, µs per link": per_call_us(sluice_known, calls=20)
        / len(hrefs),
        "urljoin + w3lib canonicalize_url + scope, µs per link": per_call_us(peer, calls=20) / len(hrefs),
        "sluice: resolve + canonicalize only (canonical_link), µs per link": per_call_us(
            lambda: [canonical_link(h, base) for h in hrefs], calls=20
        )
        / len(hrefs),
    }


def main() -> None:
    pin_to_core(CLIENT_CORE)
    found = {"standard": measure(False), "heavy": measure(True), "links": measure_links()}
    if "--json" in sys.argv[1:]:
        print(RESULT_PREFIX + json.dumps(found))
        return
    for kind, stages in found.items():
        print(f"{kind} listing page, CPU µs per page (best of 5):" if kind != "links" else "links of a docs page:")
        for stage, us in stages.items():
            print(f"  {stage:48} {us:8.1f}")


if __name__ == "__main__":
    main()

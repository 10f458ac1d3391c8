"""One page's extraction, Sluice against the aiohttp + selectolax peer's parse, offline: CPU and page faults.

``python -m bench.extract_micro [--pages 200] [--repeats 3] [--json]`` renders the demo's listing
pages (bench.serve's renderer: ~50 KB, and ~400 KB with ``--heavy`` chrome), and in a fresh
interpreter for each client and size, pinned to one core, hands it a new copy of a page's body at
a time, as bodies come off the network, for a warm-up and then ``--pages`` pages:

- ``sluice``: ``parser_input`` (the UTF-8 check) and ``extract_page`` with the bench spec
  (four fields a card, ``absolute_url``, ``price``, a regex), as the engine's fetcher hands a page over;
- ``sluice-untuned``: the same, without extraction's heap settings (:mod:`sluice.extraction.heap`);
- ``peer``: bench.client_peer's ``cards``, the same four fields with lexbor, ``urljoin`` and regexes.

It prints CPU-ms a page (``process_time``; best and median of ``--repeats`` interleaved rounds), minor
page faults a page (``ru_minflt``) and peak RSS, and Sluice's CPU over the peer's. The body's copy
is in every column alike (~20 µs for 400 KB); fetching is not (``bench.client_*`` measure that).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.common import CLIENT_CORE, RESULT_PREFIX, pin_to_core

BASE = "http://127.0.0.1:8710"
DISTINCT = 8
"""Distinct pages a run cycles through (a page's values recur across runs, not within one's warm-up)."""
WARM = 16
CLIENTS = ("sluice", "sluice-untuned", "peer")
SIZES = ("50KB", "400KB")


def _one(client: str, size: str, pages: int) -> dict[str, Any]:
    """Run one client on one size in this interpreter: CPU-ms and minor faults a page, peak RSS."""
    from bench.client_peer import cards
    from bench.client_sluice import bench_spec
    from sluice.extraction import heap
    from sluice.extraction.charset import parser_input
    from sluice.extraction.extract import extract_page
    from sluice_tools.demosite.catalogue import Catalogue

    catalogue = Catalogue(books=DISTINCT * 20, heavy=size == "400KB")
    rendered = [catalogue.get(f"/catalogue/page-{n}.html") for n in range(1, DISTINCT + 1)]
    served = [(f"{BASE}/catalogue/page-{n}.html", p.body, p.content_type) for n, p in enumerate(rendered, 1) if p]
    spec = bench_spec(BASE, DISTINCT, 32)
    if client == "sluice-untuned":
        heap._tuned = True  # as if already done: tune_heap() does nothing

    def run(count: int) -> int:
        found = 0
        for n in range(count):
            url, body, content_type = served[n % len(served)]
            fresh = bytes(bytearray(body))  # a new body a page, as it comes off the network
            if client == "peer":
                found += len(cards(url, fresh))
            else:
                found += len(extract_page(spec, url, parser_input(fresh, content_type)).records)
        return found

    run(WARM)
    before, cpu = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    records = run(pages)
    cpu, after = time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF)
    assert records == 20 * pages, records
    return {
        "client": client,
        "size": size,
        "bytes": min(len(body) for _, body, _ in served),
        "cpu_ms": cpu / pages * 1e3,
        "faults": (after.ru_minflt - before.ru_minflt) / pages,
        "rss_mb": after.ru_maxrss / 1024,
    }


def _fresh(client: str, size: str, pages: int, core: int) -> dict[str, Any]:
    """:func:`_one` in a new interpreter (its heap as a process's first pages find it)."""
    command = [sys.executable, "-m", "bench.extract_micro", "--one", client, size, "--pages", str(pages)]
    command += ["--core", str(core)]
    answer = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ)
    line = next(line for line in answer.stdout.splitlines() if line.startswith(RESULT_PREFIX))
    result: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
    return result


def measure(pages: int, repeats: int, core: int) -> list[dict[str, Any]]:
    """Per size and client, the rounds' CPU-ms a page (best, median), faults a page and peak RSS."""
    rounds: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(repeats):  # interleaved: a load that comes and goes falls on every client alike
        for size in SIZES:
            for client in CLIENTS:
                rounds.setdefault((size, client), []).append(_fresh(client, size, pages, core))
    rows = []
    for (size, client), runs in rounds.items():
        cpu = [r["cpu_ms"] for r in runs]
        rows.append(
            {
                "size": size,
                "client": client,
                "bytes": runs[0]["bytes"],
                "cpu_ms_best": min(cpu),
                "cpu_ms_median": statistics.median(cpu),
                "faults": statistics.median(r["faults"] for r in runs),
                "rss_mb": statistics.median(r["rss_mb"] for r in runs),
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as text, with each Sluice row's CPU (median) over the peer's of the same size."""
    peer = {r["size"]: r["cpu_ms_median"] for r in rows if r["client"] == "peer"}
    lines = [f"{'page':>6} {'client':>15} {'CPU-ms best':>12} {'median':>7} {'faults':>7} {'RSS MB':>7} {'/ peer':>7}"]
    for r in rows:
        ratio = f"{r['cpu_ms_median'] / peer[r['size']]:.2f}x" if r["client"] != "peer" else ""
        lines.append(
            f"{r['size']:>6} {r['client']:>15} {r['cpu_ms_best']:12.3f} {r['cpu_ms_median']:7.3f}"
            f" {r['faults']:7.1f} {r['rss_mb']:7.1f} {ratio:>7}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pages", type=int, default=200, help="pages measured a round (after a warm-up)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per client and size")
    parser.add_argument("--core", type=int, default=CLIENT_CORE, help="the core each round is pinned to")
    parser.add_argument("--json", action="store_true", help="one RESULT line of JSON instead of a table")
    parser.add_argument("--one", nargs=2, metavar=("CLIENT", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        pin_to_core(args.core)
        print(RESULT_PREFIX + json.dumps(_one(args.one[0], args.one[1], args.pages)))
        return
    rows = measure(args.pages, args.repeats, args.core)
    print(RESULT_PREFIX + json.dumps(rows) if args.json else table(rows))


if __name__ == "__main__":
    main()

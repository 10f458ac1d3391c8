"""Where `bench.many_hosts`' crawl falls short of its ideal: counts, not seconds alone.

    .venv/bin/python -m bench.host_split [--hosts 20] [--cap 2] [--pages 60] [--latency-ms 50] [--workers 8]
        [--processes 2]

One ``sluice run`` against the same demo sites as :mod:`bench.many_hosts`, then from the run's ``batch done``
lines and the sites' request logs: the hosts each batch held and the pages each worker process visited, and for
each host its requests' starts, so the rounds in which the host's slot sat idle (a gap between two of its
requests longer than one answer's latency while it had URLs left to fetch).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml
from infra.config import DEFAULT

from bench.many_hosts import MAX_SECONDS, _spec, _urls
from sluice.spec import parse_spec
from sluice_tools.demosite.catalogue import Catalogue
from sluice_tools.demosite.config import DemoSiteConfig
from sluice_tools.demosite.server import DemoSite
from sluice_tools.runner.local import LocalFleet


async def _serve(hosts: int, latency_ms: float) -> None:
    sites = []
    for n in range(hosts):
        site = DemoSite(DemoSiteConfig(latency_ms=latency_ms), Catalogue(books=100, per_page=20))
        await site.start(f"127.0.0.{n + 2}", 0)
        sites.append(site)
    print("READY " + " ".join(s.base_url for s in sites), flush=True)
    loop = asyncio.get_running_loop()
    await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.buffer.read), timeout=MAX_SECONDS)
    starts = {s.base_url: [r.at for r in s.stats.records()] for s in sites}
    print(json.dumps({"starts": starts, "sites_cpu_s": time.process_time()}))
    for site in sites:
        await site.stop()


def idle_rounds(starts: list[float], latency_s: float, cap: int) -> int:
    """Rounds (answers' latencies) a host's slot sat idle between its first and last request: for each gap
    between consecutive starts, the latencies in it past the one its answer took, shared by its ``cap`` slots."""
    ordered = sorted(starts)
    idle = 0.0
    for a, b in itertools.pairwise(ordered):
        idle += max(0.0, (b - a) - latency_s * 1.5) / latency_s
    return round(idle)


def batches(logs: Path) -> list[dict[str, Any]]:
    out = []
    for line in logs.read_text(encoding="utf-8").splitlines():
        if line.startswith("{") and '"batch done"' in line:
            out.append(json.loads(line))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--cap", type=int, default=2)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.latency_ms))
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.host_split", "--serve", str(args.hosts), "--latency-ms", str(args.latency_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    bases = server.stdout.readline().split()[1:]
    data = _spec(_urls(bases, args.pages), args.cap)
    with tempfile.TemporaryDirectory() as folder:
        crawls = Path(folder) / "crawls"
        crawls.mkdir()
        (crawls / "many-hosts.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        fleet = LocalFleet(
            crawls,
            Path(folder) / "state",
            workers=args.workers,
            processes=args.processes,
            allow_loopback=True,
            config=DEFAULT,
        )
        cpu0 = os.times()
        started = time.perf_counter()
        run = fleet.run(parse_spec(data))
        wall = time.perf_counter() - started
        cpu1 = os.times()
        done = batches(Path(run.outputs["logs"]))
    server.stdin.close()
    served = json.loads(server.stdout.readline())
    starts: dict[str, list[float]] = served["starts"]
    server.wait(timeout=30)
    latency = args.latency_ms / 1000
    first = min(min(s) for s in starts.values() if s)
    by_pid: Counter[int] = Counter()
    hosts_by_pid: dict[int, set[str]] = defaultdict(set)
    for b in done:
        pid = int(b.get("pid", 0))
        by_pid[pid] += int(b.get("urls", 0))
        hosts_by_pid[pid].update(b.get("hosts", []))
    report = {
        "wall_s": round(wall, 2),
        "cpu_s": round(
            (cpu1.user + cpu1.children_user + cpu1.system + cpu1.children_system)
            - (cpu0.user + cpu0.children_user + cpu0.system + cpu0.children_system),
            2,
        ),
        "sites_cpu_s": round(served["sites_cpu_s"], 2),
        "crawl_s": round(max(max(s) for s in starts.values() if s) - first + latency, 2),
        "ideal_crawl_s": round(args.pages / args.cap * latency, 2),
        "batches": [
            {k: b.get(k) for k in ("pid", "host_count", "urls", "fetch_ms", "write_ms", "messages")} for b in done
        ],
        "urls_by_process": dict(by_pid),
        "per_host": {
            base: {
                "requests": len(s),
                "first_s": round(min(s) - first, 3),
                "last_s": round(max(s) - first, 3),
                "idle_rounds": idle_rounds(s, latency, args.cap),
            }
            for base, s in sorted(starts.items())
        },
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""Adaptive recrawl on the demo catalogue: requests per night over simulated nights, with and without it.

    .venv/bin/python -m bench.recrawl [--nights 6] [--books 1000] [--changed 0.01] [--grow 0.4] [--shrink 0.2]
                                      [--min-interval-days 1] [--max-age-days 7]

``sluice run`` (the local runner) against the demo site on loopback, one run a night, its clock a
day later each night (no waiting); before each night after the first, a new catalogue version
re-prices ``--changed`` of the books (a fresh random 1% each night). Two crawls of the same site:

- ``listings``: the bundled demo spec (crawls/demo-books.yaml): the 50 listing pages, 20 books each;
- ``books``: every book's own page (1,000), reached from the listing pages (link-only hubs here).

Each is run with ``recrawl`` off and on. Reported per night: pages asked of the site, records in
the output, and stale records (the output's price is not the site's that night); per run: every
change (a book re-priced) and the nights it took to reach the output. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from sluice.domain.clock import ShiftedClock
from sluice.domain.recrawl import DAY_S
from sluice.spec import load_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.demosite.threaded import RunningDemoSite
from sluice_tools.runner.local import LocalFleet

DEMO_SPEC = Path("crawls/demo-books.yaml")


def _listings(base_url: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEMO_SPEC.read_text(encoding="utf-8"))
    data["name"] = "listings"
    data["seeds"]["template"] = f"{base_url}/catalogue/page-{{n}}.html"
    return data


def _books(base_url: str) -> dict[str, Any]:
    data = _listings(base_url)
    data["name"] = "books"
    data["follow"] = {"selectors": ["li.next a", "article.product_pod h3 a"], "max_depth": 1, "max_pages": 2000}
    data["extract"] = {
        "pages": r"/catalogue/[a-z0-9-]+_\d+/index\.html$",
        "fields": {
            "title": {"selector": "div.product_main h1", "required": True},
            "price": {"selector": "div.product_main p.price_color::text", "process": ["strip", "price"]},
        },
        "key": ["title"],
    }
    return data


def _book_id(record: dict[str, Any]) -> int:
    """The demo's titles end with the book's id; the listing spec's records carry its page's url."""
    if "url" in record:
        return int(str(record["url"]).rsplit("_", 1)[1].split("/")[0])
    return int(str(record["title"]).rsplit(" ", 1)[1])


def _records(folder: str) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(Path(folder).glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return lines


def _play(
    site: RunningDemoSite, data: dict[str, Any], recrawl: dict[str, Any] | None, args: argparse.Namespace
) -> dict[str, Any]:
    """One crawl over ``args.nights`` nights: per night what was asked and how stale the output was."""
    site.set_catalogue(books=args.books, version=0, changed_fraction=args.changed)
    with tempfile.TemporaryDirectory() as tmp:
        specs = Path(tmp) / "crawls"
        specs.mkdir()
        if recrawl is not None:
            data = {**data, "recrawl": recrawl}
        (specs / f"{data['name']}.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        spec = load_spec(specs / f"{data['name']}.yaml")
        clock = ShiftedClock()  # real time plus the nights played so far
        fleet = LocalFleet(specs, Path(tmp) / "state", workers=4, allow_loopback=True, clock=clock)
        since: dict[int, int] = {}  # book id -> the night its price (as the site has it) took effect
        late: Counter[int] = Counter()  # nights a change took to reach the output -> changes
        nights = []
        for night in range(1, args.nights + 1):
            if night > 1:
                clock.advance(DAY_S)
                site.set_catalogue(books=args.books, version=night - 1, changed_fraction=args.changed)
            for book in site.catalogue.books:
                if book.changed_in == night - 1 and night > 1:
                    since[book.id] = night
            site.reset()
            run = fleet.run(spec)
            asked = sum(1 for r in site.stats.records() if r.path != "/robots.txt")
            truth = {b.id: b.price_pence / 100 for b in site.catalogue.books}
            output = {_book_id(r): r["price"] for r in _records(run.outputs["records"])}
            stale = {i for i, price in output.items() if price != truth[i]}
            for book_id in [i for i in since if i not in stale]:
                late[night - since.pop(book_id)] += 1
            pages = run.summary.to_json()["pages"]
            nights.append(
                {
                    "night": night,
                    "asked": asked,
                    "records": run.summary.to_json()["records"]["total"],
                    "stale": len(stale),
                    "not_due": pages["not_due"],
                    "healthy": run.summary.to_json()["verdict"]["healthy"],
                }
            )
        return {"nights": nights, "late": dict(sorted(late.items())), "uncaught": len(since)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nights", type=int, default=6)
    parser.add_argument("--books", type=int, default=1000)
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--grow", type=float, default=0.4)
    parser.add_argument("--shrink", type=float, default=0.2)
    parser.add_argument("--min-interval-days", type=float, default=1.0)
    parser.add_argument("--max-age-days", type=float, default=7.0)
    args = parser.parse_args()
    recrawl = {
        "grow": args.grow,
        "shrink": args.shrink,
        "min_interval_days": args.min_interval_days,
        "max_age_days": args.max_age_days,
    }
    print(f"recrawl: {recrawl}; {args.books} books, {args.changed:.0%} re-priced each night, {args.nights} nights")
    print()
    print(
        "| crawl | recrawl | pages asked, night by night | total | records each night | stale records, night by night "
        "| changes caught: same night / 1 / 2 / 3+ nights late, not yet |"
    )
    print("|---|---|---|---:|---|---|---|")
    with running_demo_site(books=args.books) as site:
        for make in (_listings, _books):
            for label, section in (("off", None), ("on", recrawl)):
                played = _play(site, make(site.base_url), section, args)
                nights = played["nights"]
                late = played["late"]
                records = sorted({n["records"] for n in nights})
                caught = " / ".join(
                    str(n)
                    for n in (late.get(0, 0), late.get(1, 0), late.get(2, 0), sum(v for k, v in late.items() if k >= 3))
                )
                print(
                    f"| {make.__name__.lstrip('_')} | {label} | {', '.join(str(n['asked']) for n in nights)} "
                    f"| {sum(n['asked'] for n in nights):,} | {', '.join(str(r) for r in records)} "
                    f"| {', '.join(str(n['stale']) for n in nights)} | {caught}, {played['uncaught']} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

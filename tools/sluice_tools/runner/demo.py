"""`make demo`: three nightly runs of the demo crawl against the demo site and a repair, told as a story.

1. The first run collects every record.
2. Overnight 1% of the books change price: the second run finds most pages not modified
   (304) and most records unchanged, and picks up the changed ones.
3. The site is redesigned and the price selector breaks: the third run ends UNHEALTHY
   with a record-count drop alert, although nothing crashed.
4. The selector is fixed in the spec, and night 3 is re-extracted from its raw archive
   (the demo spec has ``output.archive``): every record back, the verdict healthy, and the
   demo site's request counter shows that not one request reached it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice.domain.summary import RecordCounts
from sluice.pipeline.reextract import Reextracted
from sluice.spec import load_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.ops.reextract import reextract_local, report
from sluice_tools.ops.show import local_catalog_verdict
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text, progress_bar

DEMO_PORT = 8710
BROKEN_SELECTOR, FIXED_SELECTOR = "p.price_color::text", "p.price-colour::text"
"""The price selector the demo spec ships with, and the one the redesigned site (night 3) needs."""


@dataclass(frozen=True, slots=True)
class Night:
    title: str
    version: int
    broken_selector: bool
    expect_healthy: bool


NIGHTS = (
    Night("night 1: the first run collects every record", 0, False, True),
    Night("night 2: 1% of books changed price; the rest answer 304 Not Modified", 1, False, True),
    Night("night 3: the site is redesigned and the price selector breaks", 1, True, False),
)


def run_demo(spec_path: Path, state_dir: Path, *, port: int = 0, say: Callable[[str], None] = print) -> int:
    """Run the three nights and the repair; 0 if each ended as the story says it should (the third one
    unhealthy, then healthy again from the archive with no request to the site)."""
    shutil.rmtree(state_dir, ignore_errors=True)
    runs: list[LocalRun] = []
    repair: tuple[Reextracted, int] | None = None
    with running_demo_site(port=port, changed_fraction=0.01) as site:
        spec_path = _point_at(spec_path, site.port, state_dir / "crawls")
        spec = load_spec(spec_path)
        runner = LocalFleet(spec_path.parent, state_dir, workers=4, allow_loopback=True, say=say)
        say(
            f"demo site serving on {site.base_url} (127.0.0.1 only); "
            f"state in {state_dir}/ (SQLite and files, as the stack keeps it in DynamoDB and S3)\n"
        )
        for night in NIGHTS:
            site.set_catalogue(version=night.version, broken_selector=night.broken_selector, changed_fraction=0.01)
            say(f"== {night.title}")
            with progress_bar(spec.name, enabled=True) as show:
                run = runner.run(spec, progress=show)
            runs.append(run)
            say(as_text(run, local_catalog_verdict(state_dir, run.summary)) + "\n")
        say("== night 4: the price selector is fixed in the spec, and night 3 is re-extracted from its archive")
        _fix_selector(spec_path)
        before = site.stats.total
        done = reextract_local(state_dir, runs[-1].run_id, spec_path, spec_path.parent)
        repair = (done, site.stats.total - before)
        say(report(done) + f"\n  requests to the demo site during the re-extraction: {repair[1]}\n")
    as_told = [r.summary.healthy == n.expect_healthy for r, n in zip(runs, NIGHTS, strict=True)]
    say(_story(runs, repair))
    repaired = repair is not None and repair[0].summary.healthy and repair[1] == 0
    if all(as_told) and repaired:
        say("Night 3 raised no exception and logged no fetch error: only the run's verdict caught it.")
        say("Night 4 sent the site nothing: the archive held every page night 3 fetched.")
        return 0
    say("The demo did not go as told: see the summaries above.")
    return 1


def _fix_selector(spec_path: Path) -> None:
    """The demo spec's copy with the price selector the redesigned site needs: what an operator would edit."""
    text = spec_path.read_text(encoding="utf-8")
    if BROKEN_SELECTOR not in text:
        raise ValueError(f"{spec_path}: no {BROKEN_SELECTOR!r} to fix")
    spec_path.write_text(text.replace(BROKEN_SELECTOR, FIXED_SELECTOR), encoding="utf-8")


def _point_at(spec_path: Path, port: int, folder: Path) -> Path:
    """A copy of the demo spec aimed at the port the site got (the shipped spec says 8710)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / spec_path.name
    target.write_text(spec_path.read_text(encoding="utf-8").replace(f"127.0.0.1:{DEMO_PORT}", f"127.0.0.1:{port}"))
    return target


def _story(runs: list[LocalRun], repair: tuple[Reextracted, int] | None = None) -> str:
    header = f"{'night':<6}{'fetched':>9}{'304':>6}{'records':>9}{'new':>6}{'changed':>9}{'unchanged':>11}  verdict"
    lines = ["summary", header]
    summaries = [(str(i), run.summary) for i, run in enumerate(runs, 1)]
    if repair is not None:
        summaries.append(("3*", repair[0].summary))
    for night, summary in summaries:
        p, r, v = summary.pages, summary.records or RecordCounts(), summary.verdict
        alerts = ", ".join(a.check for a in v.alerts)
        verdict = "healthy" if v.healthy else f"UNHEALTHY ({alerts})"
        lines.append(
            f"{night:<6}{p.fetched:>9}{p.not_modified:>6}{r.total:>9}{r.new:>6}{r.changed:>9}"
            f"{r.unchanged:>11}  {verdict}"
        )
    if repair is not None:
        done, requests = repair
        lines.append(
            f"3*: night 3 re-extracted from its archive on night 4 with the fixed selector: {done.pages} pages, "
            f"{requests} requests to the site"
        )
    return "\n".join(lines) + "\n"

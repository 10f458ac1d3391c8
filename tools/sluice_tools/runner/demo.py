"""`make demo`: three nightly runs of the demo crawl against the demo site, told as a story.

1. The first run collects every record.
2. Overnight 1% of the books change price: the second run finds most pages not modified
   (304) and most records unchanged, and picks up the changed ones.
3. The site is redesigned and the price selector breaks: the third run ends UNHEALTHY
   with a record-count drop alert, although nothing crashed.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sluice.spec import load_spec
from sluice_tools.demosite import running_demo_site
from sluice_tools.runner.local import LocalFleet
from sluice_tools.runner.session import LocalRun
from sluice_tools.runner.summary import as_text, progress_bar

DEMO_PORT = 8710


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
    """Run the three nights; 0 if each ended as the story says it should (the third one unhealthy)."""
    shutil.rmtree(state_dir, ignore_errors=True)
    runs: list[LocalRun] = []
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
            say(as_text(run) + "\n")
    as_told = [r.summary["verdict"]["healthy"] == n.expect_healthy for r, n in zip(runs, NIGHTS, strict=True)]
    say(_story(runs))
    if all(as_told):
        say("Night 3 raised no exception and logged no fetch error: only the run's verdict caught it.")
        return 0
    say("The demo did not go as told: see the summaries above.")
    return 1


def _point_at(spec_path: Path, port: int, folder: Path) -> Path:
    """A copy of the demo spec aimed at the port the site got (the shipped spec says 8710)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / spec_path.name
    target.write_text(spec_path.read_text(encoding="utf-8").replace(f"127.0.0.1:{DEMO_PORT}", f"127.0.0.1:{port}"))
    return target


def _story(runs: list[LocalRun]) -> str:
    header = f"{'night':<6}{'fetched':>9}{'304':>6}{'records':>9}{'new':>6}{'changed':>9}{'unchanged':>11}  verdict"
    lines = ["summary", header]
    for i, run in enumerate(runs, 1):
        p, r, v = run.summary["pages"], run.summary["records"], run.summary["verdict"]
        alerts = ", ".join(a["check"] for a in v["alerts"])
        verdict = "healthy" if v["healthy"] else f"UNHEALTHY ({alerts})"
        lines.append(
            f"{i:<6}{p['fetched']:>9}{p['not_modified']:>6}{r['total']:>9}{r['new']:>6}{r['changed']:>9}"
            f"{r['unchanged']:>11}  {verdict}"
        )
    return "\n".join(lines) + "\n"

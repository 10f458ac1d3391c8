"""`sluice report` opened in a real browser: Debian's Chromium, headless, driven by Playwright.

The demo's three nights are run for real (night 3's selector breaks, night 4 re-extracts it), the
report is written by the CLI, and Chromium opens the file with the network cut off. The browser must
report no console error and fetch nothing; every chart must draw one mark per point the runs give
(written out below from the demo's story, not computed by the report's code), and night 3's alerts
must be marked on its point of the time axis, linking to its run's section. A screenshot is kept in
the test's temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

from sluice_tools.cli import main
from sluice_tools.runner.demo import run_demo

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DEMO_FIELDS = 5
"""crawls/demo-books.yaml's fields: title, url, price, rating, availability."""


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a real `make demo` state: three nights, the third repaired from its archive."""
    folder = tmp_path_factory.mktemp("report")
    state = folder / "demo"
    assert run_demo(ROOT / "crawls" / "demo-books.yaml", state, say=lambda _: None) == 0
    out = folder / "report.html"
    assert main(["report", "--state", str(state), "--specs", str(state / "crawls"), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser(demo_report: Path) -> Iterator[Browser]:
    """Chromium, launched once the demo has run (Playwright's sync API holds an event loop while it runs)."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: the report's browser test needs Debian's chromium package "
            "(`make install` installs it as root: apt-get update && apt-get install -y chromium)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def opened(browser: Browser, demo_report: Path) -> Iterator[tuple[Page, list[str], list[str]]]:
    """The report in a page, with what the browser logged as errors and every request it tried beyond the file."""
    errors: list[str] = []
    requests: list[str] = []
    context = browser.new_context(viewport={"width": 1100, "height": 1400})

    def only_the_file(route: Route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_file)
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(demo_report.as_uri(), wait_until="load")
    try:
        yield page, errors, requests
    finally:
        context.close()


def _count(page: Page, chart: str, marks: str) -> int:
    return page.locator(f'figure[data-chart="{chart}"] g.{marks}_marks > a > path').count()


def test_the_report_opens_with_no_console_error_and_fetches_nothing(
    opened: tuple[Page, list[str], list[str]], demo_report: Path
) -> None:
    page, errors, requests = opened
    assert errors == []
    assert requests == []
    assert page.title() == "Sluice runs report"
    shot = demo_report.parent / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_every_chart_is_drawn_with_a_mark_per_point(opened: tuple[Page, list[str], list[str]]) -> None:
    page, _, _ = opened
    assert page.locator('figure[data-chart="demo-books"]').count() == 0  # charts are named by what they draw
    assert page.locator("figure.chart svg").count() == 6
    # 3 nights of records, and night 3's count when it ran (0, before the re-extraction).
    assert _count(page, "records", "points") == 3 + 1
    # Night 1: 50 fetched; night 2: 9 fetched and 41 not modified; night 3: 50 fetched.
    assert _count(page, "pages", "bars") == 4
    assert _count(page, "errors", "points") == 3
    assert _count(page, "nulls", "points") == 3 * DEMO_FIELDS
    assert _count(page, "duration", "points") == 3
    assert _count(page, "cost", "points") == 3
    box = page.locator('figure[data-chart="records"] svg').bounding_box()
    assert box is not None
    assert box["width"] > 300
    assert box["height"] > 100


def test_night_3s_drop_is_marked_on_its_point_and_links_to_its_run(opened: tuple[Page, list[str], list[str]]) -> None:
    page, _, _ = opened
    for chart in ("records", "pages", "errors", "nulls", "duration", "cost"):
        assert page.locator(f'figure[data-chart="{chart}"] g.alerts_marks > a > line').count() == 1, chart
    marker = page.locator('figure[data-chart="records"] g.alerts_marks > a > line').first
    label = marker.get_attribute("aria-label") or ""
    assert "record_count_drop (at run time): 0 records vs 1000 in the previous run" in label
    assert "records_nonzero (at run time)" in label
    target = page.locator('figure[data-chart="records"] g.alerts_marks > a').first.get_attribute("xlink:href")
    assert target is not None
    assert target.startswith("#run-")
    section = page.locator(f"section{target}")
    assert section.count() == 1
    assert section.locator("h3").inner_text().startswith("Run #3: ")
    assert section.locator('li.alert[data-check="record_count_drop"]').count() == 1
    # The marker stands on night 3's point: the third of the records line's points shares its x.
    points = page.locator('figure[data-chart="records"] g.points_marks > a > path')
    third = points.nth(2).bounding_box()
    line = marker.bounding_box()
    assert third is not None
    assert line is not None
    assert abs((third["x"] + third["width"] / 2) - (line["x"] + line["width"] / 2)) < 2

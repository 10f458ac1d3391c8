"""The report as one self-contained HTML file: each crawl's charts as inline SVG, then a section per run.

No script, no stylesheet or font from elsewhere, no image to fetch: the file opens the same offline,
attached to a mail, or years later. A chart's points link to their run's section (``#run-ID``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from sluice_tools.report.charts import Chart, crawl_charts
from sluice_tools.report.history import CrawlHistory, RunPoint

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 62em; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
figure.chart { margin: 1em 0; } figure.chart svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .15em .6em; text-align: left; }
th { background: #f3f3f3; } .bad { color: #c0392b; font-weight: bold; } .ok { color: #1e8449; }
section.run { border-left: 3px solid #ccc; padding-left: 1em; margin: 1.5em 0; }
section.run.unhealthy { border-color: #c0392b; } ul.alerts li { color: #c0392b; }
"""


def _figure(crawl: str, chart: Chart) -> str:
    return f'<figure class="chart" data-crawl="{escape(crawl)}" data-chart="{chart.name}">\n{chart.svg}\n</figure>'


def _run_section(run: RunPoint, index: int) -> str:
    state = "healthy" if run.healthy else "unhealthy"
    pages = "".join(f"<tr><th>{escape(k)}</th><td>{v:,}</td></tr>" for k, v in run.pages.items())
    checks = "".join(
        f'<tr><td class="{"ok" if c.ok else "bad"}">{"ok" if c.ok else "FAILED"}</td>'
        f"<td>{escape(c.check)}</td><td>{escape(c.message)}</td></tr>"
        for c in run.checks
    )
    alerts = "".join(
        f'<li class="alert" data-check="{escape(a.check)}">{escape(a.check)} ({escape(a.when)}): '
        f"{escape(a.message)}</li>"
        for a in run.alerts
    )
    failures = "".join(f"<tr><td>{escape(r)}</td><td>{n:,}</td></tr>" for r, n in sorted(run.failures.items()))
    before = (
        f"<p>Re-extracted from its archive: {run.records_at_run_time:,} records when it ran, {run.records:,} now.</p>"
        if run.records_at_run_time is not None
        else ""
    )
    cost = f"${run.cost_usd:.4f}" if run.cost_usd is not None else "-"
    duration = f"{run.duration_s:.1f} s" if run.duration_s is not None else "-"
    return (
        f'<section class="run {state}" id="{escape(run.anchor)}">\n'
        f"<h3>Run #{index + 1}: {escape(run.run_id)} ({state})</h3>\n"
        f"<p>Started {escape(run.started_at)}; {run.records:,} records; error rate {run.error_rate:.1%}; "
        f"{duration}; estimated cost {cost}.</p>\n{before}"
        + (f'<ul class="alerts">{alerts}</ul>\n' if alerts else "")
        + f"<table><tr><th>check</th><th></th><th>message</th></tr>{checks}</table>\n"
        f"<table>{pages}</table>\n"
        + (f"<table><tr><th>failure</th><th>pages</th></tr>{failures}</table>\n" if failures else "")
        + "</section>"
    )


def crawl_section(history: CrawlHistory) -> str:
    if not history.runs:
        return f'<h2 id="crawl-{escape(history.crawl)}">{escape(history.crawl)}</h2>\n<p>No finished run yet.</p>'
    charts = "\n".join(_figure(history.crawl, chart) for chart in crawl_charts(history))
    runs = "\n".join(_run_section(run, i) for i, run in enumerate(history.runs))
    unhealthy = sum(not r.healthy or bool(r.alerts) for r in history.runs)
    return (
        f'<h2 id="crawl-{escape(history.crawl)}">{escape(history.crawl)}</h2>\n'
        f"<p>The last {len(history.runs)} run(s); {unhealthy} with alerts (red dashed rules, each linking to its"
        " run).</p>\n"
        f"{charts}\n<h3>Runs</h3>\n{runs}"
    )


def report_html(histories: list[CrawlHistory], where: str, now: datetime | None = None) -> str:
    """The whole report: a heading saying where the runs were read and when, then each crawl."""
    written = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join(crawl_section(h) for h in histories)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>Sluice runs report</title>\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<h1>Sluice runs report</h1>\n"
        f"<p>Runs read from {escape(where)}, written {written}.</p>\n{body}\n</body>\n</html>\n"
    )

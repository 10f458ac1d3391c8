"""The report's charts: Vega-Lite specs, rendered to SVG when the report is written (vl-convert).

vl-convert runs Vega-Lite and Vega in an embedded JavaScript engine and writes the SVG a browser would
draw, so the report holds finished pictures: no script, no CDN, nothing fetched when it is opened.
Each chart names its marks (``points``, ``bars``, ``alerts``), which the SVG keeps as class names
(``points_marks``): the browser test counts what was drawn by them. Every point links to its run's
section of the page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import vl_convert

from sluice_tools.report.history import OUTCOMES, CrawlHistory, RunPoint

VEGA_LITE = "v5.21"
"""The Vega-Lite version vl-convert renders with (it bundles several; pinned so a report does not drift)."""
_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
_VEGA_BASE = "https://vega.github.io/vega-datasets/"
"""Vega's default base URL, which it puts before every relative link: the report's links are to its own page."""
_WIDTH, _HEIGHT = 560, 160
_ALERT_COLOR = "#c0392b"


@dataclass(frozen=True, slots=True)
class Chart:
    """One rendered chart: its name (``data-chart``), title, SVG, and how many points it drew, by mark name."""

    name: str
    title: str
    svg: str
    drawn: dict[str, int]


def _label(run: RunPoint, index: int) -> str:
    return f"#{index + 1} {run.started_at[5:19].replace('T', ' ')}"


def _x(labels: Sequence[str]) -> dict[str, Any]:
    return {"field": "run", "type": "ordinal", "sort": list(labels), "title": "run (start, UTC)"}


def _alert_layer(runs: Sequence[RunPoint], labels: Sequence[str]) -> tuple[dict[str, Any] | None, int]:
    rows = [
        {
            "run": label,
            "href": f"#{run.anchor}",
            "alert": "; ".join(f"{a.check} ({a.when}): {a.message}" for a in run.alerts),
        }
        for run, label in zip(runs, labels, strict=True)
        if run.alerts
    ]
    if not rows:
        return None, 0
    layer = {
        "name": "alerts",
        "data": {"values": rows},
        "mark": {"type": "rule", "color": _ALERT_COLOR, "strokeWidth": 2, "strokeDash": [4, 2]},
        "encoding": {"x": _x(labels), "href": {"field": "href"}, "description": {"field": "alert"}},
    }
    return layer, len(rows)


def _chart(
    name: str, title: str, layers: list[dict[str, Any]], drawn: dict[str, int], runs: Sequence[RunPoint]
) -> Chart:
    labels = [_label(run, i) for i, run in enumerate(runs)]
    alerts, markers = _alert_layer(runs, labels)
    spec = {
        "$schema": _SCHEMA,
        "title": title,
        "width": _WIDTH,
        "height": _HEIGHT,
        "layer": [*layers, *([alerts] if alerts is not None else [])],
        "config": {"font": "sans-serif"},
    }
    return Chart(name, title, render(spec), {**drawn, "alerts": markers})


def render(spec: dict[str, Any]) -> str:
    """A Vega-Lite spec as SVG; no data is fetched (the specs carry their values inline)."""
    svg: str = vl_convert.vegalite_to_svg(json.dumps(spec), vl_version=VEGA_LITE, allowed_base_urls=[])
    return svg.replace(f'xlink:href="{_VEGA_BASE}#', 'xlink:href="#')


def _series_layers(rows: list[dict[str, Any]], labels: Sequence[str], y_title: str, y_format: str = "") -> list[Any]:
    y: dict[str, Any] = {"field": "value", "type": "quantitative", "title": y_title}
    if y_format:
        y["axis"] = {"format": y_format}
    color = {"field": "series", "type": "nominal", "title": None}
    base = {"data": {"values": rows}}
    return [
        {**base, "name": "lines", "mark": {"type": "line"}, "encoding": {"x": _x(labels), "y": y, "color": color}},
        {
            **base,
            "name": "points",
            "mark": {"type": "point", "filled": True, "size": 60},
            "encoding": {
                "x": _x(labels),
                "y": y,
                "color": color,
                "href": {"field": "href"},
                "tooltip": [{"field": "run"}, {"field": "series"}, {"field": "value"}],
            },
        },
    ]


def _row(run: RunPoint, label: str, series: str, value: float) -> dict[str, Any]:
    return {"run": label, "series": series, "value": value, "href": f"#{run.anchor}"}


def records_chart(history: CrawlHistory) -> Chart:
    """Records per run (and per type), the records a re-extracted run had when it ran, and the floor below which
    the record-count check fails."""
    runs = history.runs
    labels = [_label(run, i) for i, run in enumerate(runs)]
    rows = []
    for run, label in zip(runs, labels, strict=True):
        rows.append(_row(run, label, "records", run.records))
        rows.extend(_row(run, label, f"type {kind}", n) for kind, n in sorted(run.by_type.items()))
        if run.records_at_run_time is not None:
            rows.append(_row(run, label, "records at run time", run.records_at_run_time))
    layers = _series_layers(rows, labels, "records")
    floors = [{"run": label, "floor": run.floor} for run, label in zip(runs, labels, strict=True) if run.floor]
    if floors:
        layers.append(
            {
                "name": "floor",
                "data": {"values": floors},
                "mark": {"type": "tick", "color": "#7f8c8d", "thickness": 2},
                "encoding": {"x": _x(labels), "y": {"field": "floor", "type": "quantitative"}},
            }
        )
    return _chart("records", "Records per run (ticks: the record-count floor)", layers, {"points": len(rows)}, runs)


def pages_chart(history: CrawlHistory) -> Chart:
    """How each run's pages ended: fetched, 304, not due, failed, skipped (stacked; empty outcomes not drawn)."""
    runs = history.runs
    labels = [_label(run, i) for i, run in enumerate(runs)]
    rows = [
        {"run": label, "outcome": outcome, "pages": run.pages[outcome], "href": f"#{run.anchor}"}
        for run, label in zip(runs, labels, strict=True)
        for outcome in OUTCOMES
        if run.pages[outcome]
    ]
    layer = {
        "name": "bars",
        "data": {"values": rows},
        "mark": {"type": "bar"},
        "encoding": {
            "x": _x(labels),
            "y": {"field": "pages", "type": "quantitative", "stack": True, "title": "pages"},
            "color": {"field": "outcome", "type": "nominal", "sort": list(OUTCOMES), "title": None},
            "order": {"field": "outcome"},
            "href": {"field": "href"},
            "tooltip": [{"field": "run"}, {"field": "outcome"}, {"field": "pages"}],
        },
    }
    return _chart("pages", "Pages per run, by how they ended", [layer], {"bars": len(rows)}, runs)


def _single(
    history: CrawlHistory, name: str, title: str, series: str, values: list[float | None], fmt: str = ""
) -> Chart:
    runs = history.runs
    labels = [_label(run, i) for i, run in enumerate(runs)]
    rows = [
        _row(run, label, series, value)
        for run, label, value in zip(runs, labels, values, strict=True)
        if value is not None
    ]
    return _chart(name, title, _series_layers(rows, labels, series, fmt), {"points": len(rows)}, runs)


def error_rate_chart(history: CrawlHistory) -> Chart:
    ceiling = f" (the spec's ceiling: {history.max_error_rate:.0%})" if history.max_error_rate is not None else ""
    return _single(
        history, "errors", f"Error rate per run{ceiling}", "error rate", [r.error_rate for r in history.runs], ".1%"
    )


def null_rates_chart(history: CrawlHistory) -> Chart:
    """Per field, the share of items it was missing from."""
    runs = history.runs
    labels = [_label(run, i) for i, run in enumerate(runs)]
    rows = [
        _row(run, label, name, rate)
        for run, label in zip(runs, labels, strict=True)
        for name, rate in sorted(run.null_rates.items())
    ]
    layers = _series_layers(rows, labels, "null rate", ".0%")
    return _chart("nulls", "Null rate per field", layers, {"points": len(rows)}, runs)


def duration_chart(history: CrawlHistory) -> Chart:
    return _single(history, "duration", "Duration per run (seconds)", "seconds", [r.duration_s for r in history.runs])


def cost_chart(history: CrawlHistory) -> Chart:
    return _single(
        history, "cost", "Estimated AWS cost per run (USD)", "USD", [r.cost_usd for r in history.runs], "$.5f"
    )


def crawl_charts(history: CrawlHistory) -> list[Chart]:
    """Every chart of one crawl, in the order the report shows them."""
    builders = (records_chart, pages_chart, error_rate_chart, null_rates_chart, duration_chart, cost_chart)
    return [build(history) for build in builders]

"""A straight line through two runs of the same scenario: what a page adds (the slope), what a run costs whatever
its size (the intercept). `make cost`'s report (``bench/cost_report``) and the scale model
(``sluice_tools.scale.inputs``) both fit their per-page figures with it."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any


class NegativeSlopeWarning(UserWarning):
    """The larger run measured less than the smaller: a page would take something away (noise, or a bad pair)."""


def slope(small_pages: float, small_value: float, large_pages: float, large_value: float, *, what: str = "") -> float:
    """What a page adds between the two runs; a larger run that has no more pages than the smaller is an error,
    and a negative slope a :class:`NegativeSlopeWarning` (returned as it is, never clamped)."""
    span = large_pages - small_pages
    if span <= 0:
        raise ValueError(
            f"the larger run ({large_pages:g} pages) must have more pages than the smaller ({small_pages:g})"
        )
    value = (large_value - small_value) / span
    if value < 0:
        warnings.warn(
            f"{what or 'a figure'} falls from {small_value:g} at {small_pages:g} pages to {large_value:g} at"
            f" {large_pages:g}: a negative slope",
            NegativeSlopeWarning,
            stacklevel=2,
        )
    return value


def small_for(report: Mapping[str, Any], label: str, below: float | None = None) -> dict[str, Any] | None:
    """`make cost`'s smaller run of scenario ``label`` (None in a report from before it measured two); with
    ``below``, only a run of fewer pages than that (and more than none)."""
    runs: Iterable[dict[str, Any]] = report.get("small_scenarios", [])
    for run in runs:
        if run.get("label") != label:
            continue
        if below is None or 0 < float(run.get("pages", 0)) < below:
            return run
    return None

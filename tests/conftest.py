"""Shared by every test folder: measured figures a test records are printed after the run."""

from __future__ import annotations

import pytest

MEASURED = "measured"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what tests recorded with ``record_property("measured", text)`` (xdist carries it to the controller)."""
    lines = []
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for name, value in getattr(report, "user_properties", []):
            if name == MEASURED and report.when == "call":
                lines.append(f"{report.nodeid}\n{value}")
    if lines:
        terminalreporter.section("measured")
        for block in lines:
            terminalreporter.write_line(block)

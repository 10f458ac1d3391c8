"""Rows for people and for scripts: an aligned table, CSV, or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any, Literal

Format = Literal["table", "csv", "json"]
CELL_CHARS = 80
"""A table cell longer than this is cut (with an ellipsis); CSV and JSON carry every value whole."""


def _cell(value: Any, null: str) -> str:
    if value is None:
        return null
    if isinstance(value, float):
        return repr(value)
    text = json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _numeric(column: Sequence[Any]) -> bool:
    values = [v for v in column if v is not None]
    return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def as_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, null: str = "NULL") -> str:
    """Columns aligned under their names, numbers to the right, ``null`` for None; a last line counting the rows."""
    cells = [[_cell(v, null) for v in row] for row in rows]
    widths = [max([len(name), *(len(r[i]) for r in cells)]) for i, name in enumerate(columns)]
    right = [_numeric([row[i] for row in rows]) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    out = [line(list(columns)), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def as_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else json.dumps(v, default=str) if isinstance(v, list | dict) else v for v in row]
        )
    return buffer.getvalue().rstrip("\n")


def as_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON array of objects, a key per column (values JSON cannot hold, as text)."""
    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], default=str, indent=2, ensure_ascii=False)


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: Format) -> str:
    if fmt == "csv":
        return as_csv(columns, rows)
    if fmt == "json":
        return as_json(columns, rows)
    return as_table(columns, rows)

"""JSON text exactly as ``json.dumps`` writes it with the same options, its encoder built once.

``json.dumps`` with any option builds a ``JSONEncoder`` per call, and even a kept encoder's ``encode`` builds
its C encoder (``c_make_encoder``, and a closure) on every call: about 2 µs, as long as encoding a small record
takes. :func:`json_text` builds both once; what it writes is what ``json.dumps`` writes, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:
    from _json import make_encoder
except ImportError:  # pragma: no cover - an interpreter without the C accelerator: the kept encoder's own path
    make_encoder = None  # type: ignore[assignment,misc]


def json_text(
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    separators: tuple[str, str] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """What ``json.dumps(value, sort_keys=..., ensure_ascii=..., separators=..., default=...)`` returns, as one
    function of ``value`` that builds nothing per call."""
    kept = json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=separators, default=default)
    if make_encoder is None:  # pragma: no cover
        return kept.encode
    markers: dict[int, Any] = {}
    """Containers being written (a circular one is refused as ``json.dumps`` refuses it): empty between calls."""
    write = make_encoder(
        markers,
        kept.default,
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
        None,
        kept.key_separator,
        kept.item_separator,
        sort_keys,
        False,
        True,
    )

    def text(value: Any) -> str:
        try:
            return "".join(write(value, 0))
        except BaseException:
            markers.clear()  # a write stopped midway leaves its open containers marked
            raise

    return text

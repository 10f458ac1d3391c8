"""The regular expressions a spec writes (``follow.allow``/``deny``, ``extract.pages``, ``regex`` steps).

They run on text a site chooses, so they run on RE2: time linear in the input whatever the
pattern, where a backtracking engine takes exponential time on ``(a+)+$`` against ``aaaa…b``.
RE2 refuses what it cannot run in linear time (backreferences, lookahead and lookbehind), and
such a pattern is refused when the spec is checked, saying so.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

import re2

MAX_PATTERN = 1_000
"""Characters a spec's pattern may have."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is raised with its reason; RE2 would also print it to stderr


class Match(Protocol):
    def group(self, index: int = 0, /) -> Any: ...


class Pattern(Protocol):
    """What Sluice uses of a compiled pattern (RE2's, or for trusted built-in patterns, ``re``'s)."""

    @property
    def pattern(self) -> Any: ...

    @property
    def groups(self) -> int: ...

    def search(self, text: str, /) -> Match | None: ...


class PatternError(ValueError):
    """A pattern that cannot run: its text says why, in terms a spec author can act on."""


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2, once per pattern; :class:`PatternError` if it cannot be."""
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"a pattern has at most {MAX_PATTERN} characters, this one {len(pattern)}")
    try:
        compiled: Pattern = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        try:
            re.compile(pattern)
        except re.error as python_exc:
            raise PatternError(f"{pattern!r} is not a valid regular expression: {python_exc}") from None
        raise PatternError(
            f"{pattern!r} uses what linear-time matching cannot run ({reason}): backreferences, "
            "lookahead and lookbehind are not supported, as they let one page take exponential time"
        ) from None
    return compiled

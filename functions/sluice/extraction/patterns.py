"""The regular expressions a spec writes (``follow.allow``/``deny``, ``extract.pages``, ``regex`` steps).

They run on text a site chooses, so they run on RE2: time linear in the input whatever the
pattern, where a backtracking engine takes exponential time on ``(a+)+$`` against ``aaaa…b``.
RE2 refuses what it cannot run in linear time (backreferences, lookahead and lookbehind), and
such a pattern is refused when the spec is checked, saying so.

Linear is not cheap: RE2's time is the text's length times a constant that grows with the
pattern's compiled program, up to :data:`NS_PER_INSTRUCTION_CHAR` per instruction per character
when its DFA gives way to the NFA (``((.*){30}){30}x``, 9,065 instructions, took 2.2 s on 100 KB).
So a pattern is refused past :data:`MAX_PROGRAM` instructions when the spec is checked, and
:meth:`Re2Pattern.worst_cost_s` bounds what one search can cost before it runs (the page's CPU
budget, :func:`sluice.extraction.limits.charge`, is charged with it).

Matching goes to RE2's compiled program directly for ASCII text (every URL Sluice compares is
ASCII), at about a quarter of the cost of the wrapper's ``search``, which maps every offset of a
match between characters and UTF-8 bytes; other text takes the wrapper's path.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

import re2

MAX_PATTERN = 1_000
"""Characters a spec's pattern may have."""
MAX_PROGRAM = 1_000
"""RE2 instructions a spec's pattern may compile to (``\\d+\\.html``: 13; ``(.*){30}x``: 305)."""
NS_PER_INSTRUCTION_CHAR = 2.5
"""Worst CPU nanoseconds RE2 spent per instruction per character of text (measured, NFA)."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is raised with its reason; RE2 would also print it to stderr
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_TOO_LARGE = "pattern too large"


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


class Found:
    """A match found on ASCII text: its groups by their spans (-1 for a group that took no part)."""

    __slots__ = ("_spans", "_text")

    def __init__(self, text: str, spans: list[tuple[int, int]]) -> None:
        self._text = text
        self._spans = spans

    def group(self, index: int = 0, /) -> str | None:
        """The text group ``index`` matched (0: the whole match), None when it took no part."""
        start, end = self._spans[index]
        return None if start < 0 else self._text[start:end]

    def span(self, index: int = 0, /) -> tuple[int, int]:
        """Where group ``index`` starts and ends in the text."""
        return self._spans[index]


class Re2Pattern:
    """A spec's pattern compiled by RE2, with its program size (what one search can cost)."""

    __slots__ = ("_compiled", "_match", "groups", "pattern", "program_size")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self.groups: int = compiled.groups
        self._compiled = compiled
        regexp = compiled._regexp
        self._match = regexp.Match
        self.program_size: int = regexp.ProgramSize()

    def search(self, text: str, /) -> Found | Match | None:
        """The first match of the pattern in ``text``, as ``re``'s ``search`` (None when there is none)."""
        if text.isascii():
            spans = self._match(_UNANCHORED, text.encode("ascii"), 0, len(text))
            return None if spans[0][0] < 0 else Found(text, spans)
        found: Match | None = self._compiled.search(text)
        return found

    def worst_cost_s(self, chars: int) -> float:
        """CPU seconds a search of ``chars`` characters can take at worst."""
        return self.program_size * chars * NS_PER_INSTRUCTION_CHAR * 1e-9


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Re2Pattern:
    """``pattern`` compiled by RE2, once per pattern; :class:`PatternError` if it cannot be, or costs too much."""
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"a pattern has at most {MAX_PATTERN} characters, this one {len(pattern)}")
    try:
        compiled = Re2Pattern(pattern, re2.compile(pattern, _OPTIONS))
    except re2.error as exc:
        raise _refusal(pattern, exc) from None
    if compiled.program_size > MAX_PROGRAM:
        worst = compiled.worst_cost_s(1_000_000)
        raise PatternError(
            f"{pattern!r} compiles to {compiled.program_size:,} RE2 instructions, over the {MAX_PROGRAM:,} a "
            f"pattern may have: matching time grows with instructions times text (up to {worst:,.1f} s of CPU "
            "on a 1 MB page for this one); use fewer nested or counted repeats"
        )
    return compiled


def _refusal(pattern: str, exc: re2.error) -> PatternError:
    """Why RE2 refused ``pattern``, in RE2's own words (Python's ``re`` only tells invalid from unsupported)."""
    reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    if reason.startswith(_TOO_LARGE):
        return PatternError(
            f"{pattern!r} is too large for linear-time matching (RE2: {reason}): its compiled program would "
            "pass RE2's memory bound; use fewer or smaller counted repeats"
        )
    try:
        re.compile(pattern)
    except re.error as python_exc:
        return PatternError(f"{pattern!r} is not a valid regular expression: {python_exc}")
    return PatternError(
        f"{pattern!r} uses what linear-time matching cannot run ({reason}): backreferences, "
        "lookahead and lookbehind are not supported, as they let one page take exponential time"
    )

"""A field's ``process`` steps: small functions from a value to a value, None meaning "missing"."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from sluice.extraction.limits import charge
from sluice.extraction.patterns import compile_pattern
from sluice.extraction.urls import resolve_link
from sluice.spec import ProcessStep, RegexStep, ReplaceStep

StepFn = Callable[[Any, str], Any]
"""One compiled step: ``(value, base_url) -> value``, None when the value is missing."""

# First decimal number; a sign only counts where it does not end a word ("page-3" is 3).
_NUMBER = re.compile(r"(?:(?<!\w)([-+\u2212]))?(\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|\d+(?:\.\d+)?|\.\d+)")
# First amount: digit groups split by thousands separators, then an optional decimal part.
_PRICE = re.compile(r"\d{1,3}(?:[ \u00a0\u202f'.,]\d{3})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)?")
# Needs no separator analysis: no thousands groups, and a decimal part that cannot be one.
_PLAIN_DECIMAL = re.compile(r"\d+(?:\.(?:\d{1,2}|\d{4,}))?")
_SEPARATOR = re.compile(r"[ \u00a0\u202f'.,]")
_SEPARATORS = frozenset(" \u00a0\u202f'.,")
# Stripped from both ends before the fast paths: currency signs and whitespace, none of them a digit.
_PRICE_EDGES = "$\u00a3\u20ac\u00a5\u20b9\u00c2 \t\r\n\u00a0\u202f"


def _plain_decimal(text: str, *, three_decimals: bool = True) -> float | None:
    """``float(text)`` when ``text`` is ASCII digits with at most one ``.`` between digits, else None.

    With ``three_decimals=False``, also None when exactly three digits follow the ``.``.
    """
    whole, dot, frac = text.partition(".")
    if not (whole.isascii() and whole.isdigit()):
        return None
    if dot and not (frac.isascii() and frac.isdigit() and (three_decimals or len(frac) != 3)):
        return None
    return float(text)


def parse_number(text: str) -> float | None:
    """The first decimal number in ``text`` (``'1,234.50'`` -> 1234.5, ``'-3'`` -> -3.0), else None."""
    # Fast path: the whole (stripped) text is one plain number, where the regex would find just that.
    fast = _plain_decimal(text.strip())
    if fast is not None:
        return fast
    return _parse_number_general(text)


def _parse_number_general(text: str) -> float | None:
    match = _NUMBER.search(text)
    if match is None:
        return None
    sign, digits = match.groups()
    number = float(digits.replace(",", ""))
    return -number if sign in ("-", "\u2212") else number


def parse_price(text: str) -> float | None:
    """The first amount in ``text``, currency and thousands separators ignored, else None.

    ``'£51.77'`` -> 51.77, ``'$1,299.00'`` and ``'1.299,00 €'`` -> 1299.0. A lone separator followed
    by exactly three digits is a thousands separator (``'1.299'`` -> 1299.0) unless the number
    starts with ``0`` or a group longer than three digits.
    """
    # Fast path: currency and spaces around a plain amount whose decimal part (if any) is not three
    # digits long, the only case where the regex below could read a thousands separator.
    fast = _plain_decimal(text.strip(_PRICE_EDGES), three_decimals=False)
    if fast is not None:
        return fast
    return _parse_price_general(text)


def _parse_price_general(text: str) -> float | None:
    match = _PRICE.search(text)
    if match is None:
        return None
    token = match.group()
    if _PLAIN_DECIMAL.fullmatch(token):
        return float(token)
    seps = [c for c in token if c in _SEPARATORS]
    if not seps:
        return float(token)
    last = seps[-1]
    decimal: str | None = None
    if last in ".," and seps.count(last) == 1:
        head, _, tail = token.rpartition(last)
        lead = _SEPARATOR.split(head, maxsplit=1)[0]
        if len(tail) != 3 or len(set(seps)) > 1 or lead == "0" or len(lead) > 3:
            decimal = last
    if decimal is None:
        return float("".join(c for c in token if c not in _SEPARATORS))
    head, _, tail = token.rpartition(decimal)
    return float("".join(c for c in head if c not in _SEPARATORS) + "." + tail)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _strip(value: Any, base_url: str) -> Any:
    return _text(value).strip()


def _lower(value: Any, base_url: str) -> Any:
    return _text(value).lower()


def _collapse_whitespace(value: Any, base_url: str) -> Any:
    return " ".join(_text(value).split())


def _number(value: Any, base_url: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_number(_text(value))


def _int(value: Any, base_url: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    number = value if isinstance(value, float) else parse_number(_text(value))
    return int(number) if number is not None and math.isfinite(number) else None


def _price(value: Any, base_url: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return parse_price(_text(value))


def _absolute_url(value: Any, base_url: str) -> Any:
    text = _text(value)
    return resolve_link(text, base_url) if text.strip() else None


_NAMED: dict[str, StepFn] = {
    "strip": _strip,
    "lower": _lower,
    "collapse_whitespace": _collapse_whitespace,
    "number": _number,
    "int": _int,
    "price": _price,
    "absolute_url": _absolute_url,
}


_CHARGED_S = 0.001
"""A regex search that can cost more than this is charged to the page's time budget before it runs."""


def _regex_step(pattern: str) -> StepFn:
    compiled = compile_pattern(pattern)
    group = 1 if compiled.groups else 0

    def step(value: Any, base_url: str) -> Any:
        text = _text(value)
        worst = compiled.worst_cost_s(len(text))
        if worst > _CHARGED_S:
            charge(worst, f"regex {pattern[:60]!r} on {len(text):,} characters could take {worst:.2g} s")
        match = compiled.search(text)
        return match.group(group) if match is not None else None

    return step


def _replace_step(old: str, new: str) -> StepFn:
    def step(value: Any, base_url: str) -> Any:
        text = _text(value)
        return text.replace(old, new) if old else text

    return step


def compile_step(step: ProcessStep) -> StepFn:
    """The function for one step: a name, ``{regex: PATTERN}`` or ``{replace: [OLD, NEW]}``."""
    if isinstance(step, RegexStep):
        return _regex_step(step.regex)
    if isinstance(step, ReplaceStep):
        return _replace_step(*step.replace)
    return _NAMED[step]


def _keep(value: Any, base_url: str) -> Any:
    return value


def _chain(steps: tuple[StepFn, ...]) -> StepFn:
    """One function running ``steps`` in order, stopping at the first None (no loop for one or two steps)."""
    if not steps:
        return _keep
    if len(steps) == 1:
        return steps[0]
    if len(steps) == 2:
        first, second = steps

        def two(value: Any, base_url: str) -> Any:
            value = first(value, base_url)
            return None if value is None else second(value, base_url)

        return two

    def every(value: Any, base_url: str) -> Any:
        for step in steps:
            value = step(value, base_url)
            if value is None:
                return None
        return value

    return every


_MEMO_ENTRIES = 1_024
"""Values a field's memo keeps (:func:`_memoized`); a full memo starts over."""
_MEMO_CHARS = 256
"""Longer values are never kept: they seldom recur, and the memo's memory stays under ~0.5 MB a field."""
_WORTH_A_MEMO = frozenset({"number", "int", "price"})
"""Named steps that cost more than a dictionary look-up (a regex step does too; ``strip`` and ``lower`` do not)."""
_MISS = object()


def _memoized(run: StepFn) -> StepFn:
    """``run`` remembering its result for each text it was given (a bounded memo, kept with the spec's extractor).

    Only for steps that read nothing but the value (no ``absolute_url``), so a text's result is the same
    wherever it is met. Listing pages repeat such values card after card and page after page (a
    rating's class, a stock label, a unit price): a regex step costs ~2 µs through RE2, a look-up ~0.1.
    """
    memo: dict[str, Any] = {}

    def remembered(value: Any, base_url: str) -> Any:
        if type(value) is not str or len(value) > _MEMO_CHARS:
            return run(value, base_url)
        found = memo.get(value, _MISS)
        if found is _MISS:
            found = run(value, base_url)
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[value] = found
        return found

    return remembered


def _worth_a_memo(steps: Sequence[ProcessStep]) -> bool:
    """Steps that read only the value, one of them costly enough for a memo to pay."""
    if "absolute_url" in steps:  # reads the page's base URL too
        return False
    return any(isinstance(s, RegexStep) or (isinstance(s, str) and s in _WORTH_A_MEMO) for s in steps)


class FieldProcessor:
    """A field's steps compiled once; calling it runs them in order and stops at the first None."""

    __slots__ = ("_steps", "run")

    def __init__(self, steps: Sequence[ProcessStep]) -> None:
        self._steps: tuple[StepFn, ...] = tuple(compile_step(s) for s in steps)
        chained = _chain(self._steps)
        self.run: StepFn = _memoized(chained) if _worth_a_memo(steps) else chained
        """The steps as one ``(value, base_url) -> value`` function (what extraction calls per item)."""

    def __call__(self, value: Any, base_url: str = "") -> Any:
        return self.run(value, base_url)


def process_value(value: str, steps: Sequence[ProcessStep], base_url: str = "") -> Any:
    """Apply ``steps`` to ``value`` (resolving ``absolute_url`` against ``base_url``); None if missing."""
    return FieldProcessor(steps)(value, base_url)

"""Bounds on the CPU one page can take before it is parsed.

An HTML parser keeps a stack of open elements and, for many start tags, looks down it: parse
time grows with tags times depth. lexbor took 0.04 s for 5,000 nested ``<div>``\\ s, 1.1 s for
25,000 and 55 s for 100,000 (1.1 MB, well under the body cap), while the page's neighbours in
the batch timed out. Browsers stop nesting at 512 elements; a page deeper than :data:`MAX_DEPTH`
is refused unparsed, as failed, with its reason.

The check costs one C-level count of ``<`` (:func:`tag_marks`) for almost every page: a page with at most
:data:`FEW_TAGS` tags cannot be deep enough to matter. Nested ``<div>``, ``<ul>`` or ``<section>``
are the worst case, and lexbor parses 4,096 of them in 11 ms, 8,192 in 41 ms, 12,288 in 95 ms and
16,384 in 220 ms (quadratic); a realistic 400 KB page, with icons and data-* attributes on every
card, has about 4,600 tags and parses in about 1 ms. So pages up to 8,192 tags are parsed
unscanned (at worst ~41 ms, the time of a few honest heavy pages), and the count costs about a
tenth of their parse. Only larger pages are scanned, tag by tag, with the parser's own rules in
small: void elements and elements whose end tag is optional open nothing, raw text (``script``,
``style``) holds no tags, and an end tag closes what it names within the top of the stack (as
``</div>`` closes an unclosed ``<span>`` inside it). The scan stops at the first chunk that goes
too deep, so 100,000 nested ``<div>``\\ s are refused in about a millisecond.

Measured before choosing: a bound from counts alone (opens minus closes per chunk) is cheap but
unsound (``<div/>`` opens a ``<div>``, and an end tag under an open ``<table>`` closes nothing),
and asking lexbor for the depth after the parse pays for the parse first (lexbor cannot stop
early), plus a selector walk of ~0.4 ms on the 400 KB page.

Past the parse, a step whose worst cost is known before it runs (a regex search: program size
times text, see :mod:`sluice.extraction.patterns`) is run only if that cost is at most
:data:`STEP_S`, whatever the machine's load; and a page's extraction as a whole runs within
:data:`EXTRACTION_S` seconds (:func:`page_budget` opens the budget, the item loop checks the clock
as it goes). A page over either fails alone, as a page too deep does, with its reason; its
neighbours in the batch keep their time. The clock is the monotonic one: extraction runs on the
event loop, so its time is what the neighbours wait for, and it bounds its CPU too; a CPU clock
is a system call (2.7 µs for the thread's here, where the monotonic clock takes 0.09 µs). The page
budget is loose on purpose: an honest page of 50,000 records took more than 1 s on a loaded
machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

MAX_DEPTH = 1_024
"""Open elements a page may nest (twice what browsers build before they flatten)."""
FEW_TAGS = 8_192
"""Pages with at most this many ``<`` are never scanned (worst case: ~41 ms of parsing)."""
_LOOK = 32
"""How far down the stack an end tag looks for its element (further is a stray end tag)."""

_NOT_NESTING = (
    "area|base|br|col|embed|hr|img|input|link|meta|param|source|track|wbr|keygen|"  # void
    "p|li|dt|dd|tr|td|th|option|optgroup|rb|rt|rp|rtc|thead|tbody|tfoot|colgroup|caption|"  # optional end tag
    "html|head|body"
)
# One token per nesting tag, lower-cased text: "div" opens, "/div" closes.
_TAG = rf"<(/?(?!(?:{_NOT_NESTING})[\s/>])[a-z][a-z0-9-]*)"
_RAW = r"<(script|style|textarea|title)\b.*?</\1\s*>|<!--.*?-->"


@cache
def _scanner(text: bool) -> tuple[re.Pattern[Any], re.Pattern[Any]]:
    """The raw-text and tag patterns for text or bytes, compiled on the first scan (few pages need one)."""
    if text:
        return re.compile(_RAW, re.DOTALL), re.compile(_TAG)
    return re.compile(_RAW.encode(), re.DOTALL), re.compile(_TAG.encode())


_CHUNK = 65_536
"""Characters tokenized at a time, so a page found too deep early is not tokenized whole."""


EXTRACTION_S = 10.0
"""Seconds one page's extraction may take (an honest 400 KB page takes a few ms, 50,000 records ~0.5 s)."""
STEP_S = 1.0
"""Seconds one step may cost at worst, by its own bound (a regex search), for it to be run at all."""
_deadline: ContextVar[float | None] = ContextVar("sluice_extraction_deadline", default=None)


class PageTooComplex(ValueError):
    """A page refused before parsing or stopped mid-extraction; the text says why, for its failure reason."""


@contextmanager
def page_budget(seconds: float = EXTRACTION_S) -> Iterator[None]:
    """Within the block, :func:`charge` holds the page to ``seconds`` from now."""
    token = _deadline.set(time.perf_counter() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def charge(cost_s: float, what: str) -> None:
    """Raise :class:`PageTooComplex` if the time spent so far plus ``cost_s`` passes the page's budget.

    ``cost_s`` bounds the next step's cost (0 checks what is spent); ``what`` names the step.
    Outside :func:`page_budget` nothing is charged.
    """
    deadline = _deadline.get()
    if deadline is None:
        return
    if cost_s > STEP_S:  # known before it runs, whatever the machine's load
        raise PageTooComplex(f"extraction step over its bound of {STEP_S:g} s: {what}")
    if time.perf_counter() + cost_s > deadline:
        raise PageTooComplex(f"extraction over its time budget of {EXTRACTION_S:g} s a page: {what}")


def tag_marks(html: str | bytes) -> int:
    """How many ``<`` ``html`` holds, counted at C speed.

    Bytes are counted by deleting the byte: ``replace`` finds each ``<`` with ``memchr`` and copies the
    runs between, 89 µs a realistic 400 KB page (one ``<`` in 88 bytes) and 15 µs a 50 KB one, where
    ``bytes.count`` of one byte tests every byte in a loop (145 and 20 µs). Deletion costs about 13 ns
    a ``<`` more, so the densest pages pay most: 1.3–1.4 ms for 400 KB of ``<br>``, ``<i>x</i>`` or
    ``<p>x`` against 0.19 ms by ``count``, and 3.5–6% of those pages' 24–40 ms parse, within the
    guard's tenth of it. Text (a page decoded from another charset) is counted by ``str.count``:
    ``str.replace`` has no such shortcut.
    """
    if isinstance(html, bytes):
        return len(html) - len(html.replace(b"<", b""))
    return html.count("<")


def check_nesting(html: str | bytes) -> int:
    """Raise :class:`PageTooComplex` when ``html`` nests more than :data:`MAX_DEPTH` elements; else
    the page's count of ``<`` (its tags, about), which extraction uses to choose how it queries."""
    tags = tag_marks(html)
    if tags > FEW_TAGS and _scanned_depth(html, MAX_DEPTH + 1) > MAX_DEPTH:
        raise PageTooComplex(
            f"HTML nests more than {MAX_DEPTH} elements deep: not parsed (parse time grows with depth)"
        )
    return tags


def nesting_depth(html: str | bytes, *, stop_at: int | None = None) -> int:
    """An estimate of the deepest element nesting in ``html`` (0 for a page with few tags: not scanned).

    Stops once ``stop_at`` is reached.
    """
    tags = tag_marks(html)
    return 0 if tags <= FEW_TAGS else _scanned_depth(html, stop_at)


def _scanned_depth(html: str | bytes, stop_at: int | None) -> int:
    if isinstance(html, bytes):
        raw, tags = _scanner(False)
        return _deepest(raw.sub(b"", html.lower()), tags, 47, stop_at)  # 47: "/"
    raw, tags = _scanner(True)
    return _deepest(raw.sub("", html.lower()), tags, "/", stop_at)


def _deepest(text: Any, tags: re.Pattern[Any], slash: Any, stop_at: int | None) -> int:
    stack: list[Any] = []
    deepest = 0
    limit = stop_at if stop_at is not None else len(text)
    opener = text[:0] + ("<" if isinstance(text, str) else b"<")
    start, size = 0, len(text)
    while start < size:
        end = start + _CHUNK
        if end < size:  # end the chunk before its last tag, so no tag is cut in two
            cut = text.rfind(opener, start + 1, end)
            end = cut if cut > start else end
        chunk = tags.findall(text, start, end)
        start = end
        for token in chunk:
            if token[0] != slash:
                stack.append(token)
                if len(stack) > deepest:
                    deepest = len(stack)
                    if deepest >= limit:
                        return deepest
                continue
            name = token[1:]
            if stack and stack[-1] == name:
                stack.pop()
                continue
            for down in range(len(stack) - 2, max(-1, len(stack) - 1 - _LOOK), -1):
                if stack[down] == name:
                    del stack[down:]
                    break
    return deepest

"""Turning a response body into text the way a browser would: BOM, header, meta, then a guess."""

from __future__ import annotations

import codecs
from functools import lru_cache

from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
    to_unicode,
)

# Python codecs that resolve from a label but must never decode a web page.
_UNSAFE = frozenset({"undefined", "unicode-escape", "raw-unicode-escape", "idna", "punycode", "charmap", "utf-7"})
_WIDE = frozenset({"utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "utf-32-le"})
# An HTML-compatible encoding decodes ASCII markup to itself.
_PROBE = b'<!DOCTYPE html><meta charset="x"> &amp; \\ + - _ =:;/?#[]{}~ 0123456789 abcxyz ABCXYZ'


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode ``body`` and return ``(text, encoding)``; never raises on bad bytes or bogus charsets.

    Order: byte-order mark, Content-Type charset, ``<meta>`` in the first 4 KB, UTF-8 if the
    body is valid UTF-8, else windows-1252. Undecodable bytes become U+FFFD.
    """
    bom_encoding, bom = read_bom(body)
    if bom_encoding is not None and bom is not None:
        return to_unicode(body[len(bom) :], bom_encoding), bom_encoding
    header = _usable(http_content_type_encoding(content_type), wide_ok=True)
    if header is not None and (text := _decode(body, header)) is not None:
        return text, header
    meta = html_body_declared_encoding(body)
    if meta is not None:
        # WHATWG: a meta that names UTF-16/32 was read as ASCII, so the page is really UTF-8.
        declared = "utf-8" if meta in _WIDE else _usable(meta, wide_ok=False)
        if declared is not None and (text := _decode(body, declared)) is not None:
            return text, declared
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(body, final=False)
    except UnicodeDecodeError:
        return body.decode("cp1252", "replace"), "cp1252"
    # A body cut short (max_body_bytes) may end inside a character: that is still UTF-8.
    return (text + "\ufffd" if decoder.getstate()[0] else text), "utf-8"


def parser_input(body: bytes, content_type: str | None) -> str | bytes:
    """What to hand lexbor for ``body``: the bytes themselves when :func:`decode_html` would decode
    them as UTF-8 (lexbor reads bytes as UTF-8, so the tree is the same and the decode plus
    re-encode is skipped), else :func:`decode_html`'s text.

    A page that declares UTF-8 (header or ``<meta>``) goes as bytes unchecked: :func:`decode_html`
    decodes it as UTF-8 whatever it holds, each bad sequence becoming U+FFFD, and lexbor reads bad
    bytes into the same U+FFFD (the maximal-subpart rule, as Python's decoder; tests/extract pins
    it). The check costs 100-140 µs on a 400 KB page. An undeclared page is checked: valid UTF-8 is
    taken as such, anything else is windows-1252, so the check decides the text there.
    """
    chosen = _utf8_chosen(body, content_type)
    if chosen is _DECLARED or (chosen is _UNDECLARED and _valid_utf8(body)):
        return body
    return decode_html(body, content_type)[0]


VALIDATE_CHUNK = 16 * 1024
"""Bytes a large body is checked in at a time (see :func:`_valid_utf8`)."""
VALIDATE_WHOLE_MAX = 64 * 1024
"""Bodies up to this size are checked in one piece (faster than pieces while the text stays small)."""


def _valid_utf8(body: bytes) -> bool:
    """True if ``body`` is strictly valid UTF-8.

    A body over :data:`VALIDATE_WHOLE_MAX` is decoded in :data:`VALIDATE_CHUNK` pieces and the text
    thrown away piece by piece: decoding a 400 KB page whole builds one 400-800 KB string (twice the
    bytes once a character is over U+00FF), fresh memory the kernel maps in page by page; in 16 KB
    pieces the same check took 135 µs instead of 449 (the demo's heavy listing page, best of 25).
    On a 50 KB page one piece is faster (25 µs against 31). Each piece is a slice of a memoryview,
    handed to the codec itself: an incremental decoder joins its input to what it holds back
    (``buffer + input``), a copy of every piece (115 µs against 96 on that page).
    """
    if body.isascii():
        return True
    try:
        if len(body) <= VALIDATE_WHOLE_MAX:
            body.decode("utf-8")
            return True
        view, size, start, end = memoryview(body), len(body), 0, 0
        while end < size:  # a piece a round; what the codec holds back (a cut sequence) leads the next
            end += VALIDATE_CHUNK
            # final at the end: a sequence cut short there is not valid
            start += codecs.utf_8_decode(view[start:end], "strict", end >= size)[1]
    except UnicodeDecodeError:
        return False
    return True


_DECLARED = "declared"
_UNDECLARED = "undeclared"


def _utf8_chosen(body: bytes, content_type: str | None) -> str | None:
    """How :func:`decode_html` comes to decode ``body`` as UTF-8, the BOM-less way: :data:`_DECLARED`
    (the header or a ``<meta>`` says so: it decodes as UTF-8 whatever the bytes), :data:`_UNDECLARED`
    (nothing is declared: only if the bytes are valid UTF-8), or None (another encoding, or a BOM)."""
    if read_bom(body)[0] is not None:
        return None
    header = _usable(http_content_type_encoding(content_type), wide_ok=True)
    if header is not None:
        return _DECLARED if header == "utf-8" else None  # decoding as UTF-8 (with replacement) never fails
    meta = html_body_declared_encoding(body)
    if meta is not None:
        declared = "utf-8" if meta in _WIDE else _usable(meta, wide_ok=False)
        if declared is not None:
            return _DECLARED if declared == "utf-8" else None
    return _UNDECLARED  # the undeclared default: valid UTF-8 is taken as UTF-8


@lru_cache(maxsize=256)
def _usable(encoding: str | None, wide_ok: bool) -> str | None:
    """``encoding``'s Python codec name if it is safe for HTML, else None."""
    if encoding is None:
        return None
    name = resolve_encoding(encoding)
    if name is None or name in _UNSAFE:
        return None
    info = codecs.lookup(name)
    name = info.name
    if name in ("utf-16", "utf-32"):  # WHATWG: the bare label means little-endian
        return name + "-le" if wide_ok else None
    if name in _WIDE:
        return name if wide_ok else None
    if not getattr(info, "_is_text_encoding", True):
        return None
    try:
        if _PROBE.decode(name) != _PROBE.decode("ascii"):
            return None
    except (UnicodeError, LookupError):
        return None
    return name


def _decode(body: bytes, encoding: str) -> str | None:
    try:
        return to_unicode(body, encoding)
    except (UnicodeError, LookupError):
        return None

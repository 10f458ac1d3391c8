"""Decoding response bodies: header, BOM, meta, UTF-8, windows-1252, and bogus charsets."""

from __future__ import annotations

import codecs
import random

import pytest
from selectolax.lexbor import LexborHTMLParser

from sluice.extraction.charset import decode_html, parser_input

CP1252_PAGE = (
    "<!DOCTYPE html>\n<html><head>\n"
    '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">\n'
    "<title>Café €</title></head><body>\n"
    '<article class="product_pod"><h3><a href="#" title="Café crème à 5 €">Café</a></h3>'
    '<p class="description">It’s a naïve café – “quoted”.</p></article>\n'
    "</body></html>\n"
)


def test_windows_1252_declared_only_in_meta() -> None:
    text, encoding = decode_html(CP1252_PAGE.encode("cp1252"), "text/html")
    assert encoding == "cp1252"
    assert text == CP1252_PAGE
    assert all(c in text for c in "é€’")


def test_meta_charset_attribute() -> None:
    body = '<html><head><meta charset="windows-1252"></head><body>é€’</body></html>'.encode("cp1252")
    text, encoding = decode_html(body, None)
    assert (encoding, "é€’" in text) == ("cp1252", True)


def test_header_charset_wins_over_meta() -> None:
    body = '<meta charset="windows-1252"><p>é€’</p>'.encode()
    assert decode_html(body, "text/html; charset=UTF-8") == ('<meta charset="windows-1252"><p>é€’</p>', "utf-8")


def test_bom_wins_over_header() -> None:
    body = codecs.BOM_UTF8 + "<p>é€’</p>".encode()
    assert decode_html(body, "text/html; charset=iso-8859-1") == ("<p>é€’</p>", "utf-8")


def test_utf16_bom() -> None:
    body = codecs.BOM_UTF16_LE + "<p>é€’</p>".encode("utf-16-le")
    assert decode_html(body, None) == ("<p>é€’</p>", "utf-16-le")


def test_undeclared_utf8() -> None:
    assert decode_html("<p>é€’</p>".encode(), None) == ("<p>é€’</p>", "utf-8")


def test_undeclared_non_utf8_falls_back_to_windows_1252() -> None:
    assert decode_html("<p>Café € – it’s</p>".encode("cp1252"), None) == ("<p>Café € – it’s</p>", "cp1252")


def test_undeclared_bytes_that_happen_to_be_utf8_stay_utf8() -> None:
    # cp1252 'é€’' is E9 80 92, which is also valid UTF-8 ('递'): valid UTF-8 is taken as UTF-8.
    assert decode_html("é€’".encode("cp1252"), None) == ("递", "utf-8")


def test_utf8_cut_inside_a_character_stays_utf8() -> None:
    text, encoding = decode_html("<p>café €".encode()[:-1], None)
    assert (text, encoding) == ("<p>café \ufffd", "utf-8")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html; charset=bogus",
        "text/html; charset=base64",
        "text/html; charset=rot13",
        "text/html; charset=undefined",
        "text/html; charset=unicode_escape",
        "text/html; charset=idna",
        "text/html; charset=utf-7",
        "text/html; charset=cp037",
        "text/html; charset=",
        "text/html; charset",
        "",
        None,
    ],
)
def test_bogus_header_charset_falls_back(content_type: str | None) -> None:
    body = "<p>café \\u00e9 +ADw-</p>".encode()
    assert decode_html(body, content_type) == ("<p>café \\u00e9 +ADw-</p>", "utf-8")


def test_bogus_header_charset_falls_back_to_meta() -> None:
    body = '<meta charset="windows-1252"><p>é€’</p>'.encode("cp1252")
    assert decode_html(body, "text/html; charset=no-such-thing") == (
        '<meta charset="windows-1252"><p>é€’</p>',
        "cp1252",
    )


def test_meta_naming_utf16_means_utf8() -> None:
    body = '<meta charset="utf-16"><p>é</p>'.encode()
    assert decode_html(body, None) == ('<meta charset="utf-16"><p>é</p>', "utf-8")


def test_bad_bytes_never_raise() -> None:
    text, encoding = decode_html(b"<p>\xff\xfe\x00 \xc3(</p>", "text/html; charset=utf-8")
    assert (text, encoding) == ("<p>\ufffd\ufffd\x00 \ufffd(</p>", "utf-8")


def test_empty_body() -> None:
    assert decode_html(b"", None) == ("", "utf-8")


PARSER_INPUT_CASES = [
    ("<title>Caf\u00e9 &amp; &eacute;</title><p>\u00a351.77 \u2013 \u201cok\u201d</p>".encode(), "text/html"),
    ("<title>Caf\u00e9</title>".encode(), "text/html; charset=utf-8"),
    ("<title>Caf\u00e9</title>".encode(), None),
    (b"", None),
    (CP1252_PAGE.encode("cp1252"), "text/html"),
    ('<meta charset="windows-1252"><p>\u00e9\u20ac\u2019</p>'.encode(), "text/html; charset=UTF-8"),
    ('<meta charset="utf-16"><p>\u00e9</p>'.encode(), None),
    ('<meta charset="iso-8859-2"><p>\u00e9</p>'.encode("iso-8859-2"), None),
    (codecs.BOM_UTF8 + "<p>\u00e9\u20ac\u2019</p>".encode(), "text/html; charset=iso-8859-1"),
    (codecs.BOM_UTF16_LE + "<p>\u00e9</p>".encode("utf-16-le"), None),
    ("<p>Caf\u00e9 \u20ac</p>".encode("cp1252"), None),
    ("<p>Caf\u00e9 \u20ac</p>".encode("cp1252"), "text/html; charset=utf-8"),
    ("<p>caf\u00e9 \u20ac</p>".encode()[:-6], "text/html; charset=utf-8"),
    ("<p>caf\u00e9 \u20ac".encode()[:-1], None),
]


@pytest.mark.parametrize(("body", "content_type"), PARSER_INPUT_CASES)
def test_parser_input_parses_like_the_decoded_text(body: bytes, content_type: str | None) -> None:
    text, encoding = decode_html(body, content_type)
    given = parser_input(body, content_type)
    if isinstance(given, bytes):
        assert given is body
        assert encoding == "utf-8"
        assert body.decode("utf-8", "replace") == text
    else:
        assert given == text
    from_bytes, from_text = LexborHTMLParser(given), LexborHTMLParser(text)
    assert from_bytes.html == from_text.html
    assert from_bytes.text() == from_text.text()


def test_parser_input_hands_valid_utf8_over_as_bytes_and_the_rest_as_text() -> None:
    utf8 = "<title>Caf\u00e9</title>".encode()
    assert parser_input(utf8, "text/html; charset=utf-8") is utf8
    assert parser_input(utf8, None) is utf8
    cp1252 = CP1252_PAGE.encode("cp1252")
    assert parser_input(cp1252, "text/html") == CP1252_PAGE
    assert isinstance(parser_input(codecs.BOM_UTF8 + utf8, None), str)
    assert isinstance(parser_input(b"<p>\xe9</p>", None), str)  # undeclared and not UTF-8: windows-1252


def test_a_page_declaring_utf8_goes_as_bytes_unchecked_and_parses_as_decode_html_decodes_it() -> None:
    """Declared UTF-8 (header or meta) is decoded as UTF-8 whatever the bytes hold, so the bytes go to
    lexbor as they are, not checked first: lexbor turns each bad sequence into U+FFFD as Python does."""
    for body, content_type in (
        (b"<p title='a\xe9b'>\xe9</p>", "text/html; charset=utf-8"),
        (b'<meta charset="utf-8"><p>\xff\xc3(</p>', None),
        (b'<meta charset="utf-16"><p>\xe2\x82</p>', "text/html"),
    ):
        assert parser_input(body, content_type) is body
        text, encoding = decode_html(body, content_type)
        assert encoding == "utf-8"
        assert "\ufffd" in text
        from_bytes, from_text = LexborHTMLParser(body), LexborHTMLParser(text)
        assert from_bytes.html == from_text.html
        titles = [[p.attrs.get("title") for p in tree.css("p")] for tree in (from_bytes, from_text)]
        assert titles[0] == titles[1]


def test_lexbor_replaces_bad_utf8_as_pythons_decoder_does_on_random_bytes() -> None:
    """What handing declared UTF-8 over unchecked rests on, for every kind of bad or cut sequence, in
    text and in attribute values: lexbor's tree of the bytes is the tree of their replace-decoded text."""
    rng = random.Random(2048)
    bad_pages = 0
    for _ in range(400):
        inner = _random_utf8ish(rng, rng.randrange(1, 200))
        if rng.random() < 0.3:  # cut anywhere, as max_body_bytes does
            inner = inner[: rng.randrange(0, len(inner) + 1)]
        body = b"<div title='" + inner.replace(b"'", b"") + b"'>" + inner
        text, encoding = decode_html(body, "text/html; charset=utf-8")
        assert encoding == "utf-8"
        bad_pages += "\ufffd" in text
        from_bytes, from_text = LexborHTMLParser(body), LexborHTMLParser(text)
        assert from_bytes.html == from_text.html, body
        assert from_bytes.text() == from_text.text(), body
    assert bad_pages > 100


def test_a_large_body_is_checked_in_pieces_as_strictly_as_whole() -> None:
    from sluice.extraction.charset import VALIDATE_CHUNK, VALIDATE_WHOLE_MAX

    euro = "\u20ac".encode()  # three bytes
    pad = b"<p>" + b"a" * (VALIDATE_CHUNK - 4)  # the euro sign straddles the first piece's end
    straddling = pad + euro + b"</p>" + "\u2026 \u00a3".encode() * 12000
    assert len(straddling) > VALIDATE_WHOLE_MAX
    assert parser_input(straddling, "text/html; charset=utf-8") is straddling
    assert parser_input(straddling, None) is straddling
    for bad in (
        pad + euro[:2] + b"</p>" + b"b" * VALIDATE_WHOLE_MAX,  # cut short at a piece's end, ASCII after it
        straddling + b"\xff" + b"c" * 10,  # an invalid byte in the last piece
        straddling + euro[:2],  # a body cut short inside its last character
        straddling[:VALIDATE_CHUNK] + b"\xed\xa0\x80" + straddling[VALIDATE_CHUNK:],  # an encoded surrogate
    ):  # undeclared: the check decides (valid UTF-8, else windows-1252)
        given = parser_input(bad, None)
        assert given == decode_html(bad, None)[0]
        assert isinstance(given, str)


def _random_utf8ish(rng: random.Random, length: int) -> bytes:
    """Mostly ASCII markup with characters of every width, and now and then a bad or cut sequence."""
    boundaries = (0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF)
    bad = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
    bad += [b"\xf5", b"\xff", b"\xfe"]
    parts: list[bytes] = []
    size = 0
    while size < length:
        roll = rng.random()
        if roll < 0.6:
            part = rng.choice((b"<p>", b"</p>", b"a", b" ", b"<div class=x>", b"\n"))
        elif roll < 0.97:
            point = rng.choice(boundaries) if rng.random() < 0.2 else rng.randrange(0x80, 0x110000)
            part = chr(point if not 0xD800 <= point < 0xE000 else 0xE000).encode()
        elif roll < 0.985:
            part = rng.choice(bad)
        else:  # a character of 2-4 bytes cut short, whatever follows it
            encoded = chr(rng.choice((0xE9, 0x20AC, 0x1F600, rng.randrange(0x10000, 0x110000)))).encode()
            part = encoded[: rng.randrange(1, len(encoded))]
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def test_the_piecewise_check_agrees_with_decoding_whole_on_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of a memoryview, each handed to the codec, accept exactly the bytes ``bytes.decode`` accepts:
    valid, invalid and cut-short sequences, at every place against a piece's end (pieces of 1 to 9 bytes)."""
    from sluice.extraction import charset

    rng = random.Random(1818)
    outcomes = set()
    for round_ in range(3000):
        body = _random_utf8ish(rng, rng.randrange(1, 120))
        if rng.random() < 0.3:  # cut the body anywhere, as max_body_bytes does
            body = body[: rng.randrange(0, len(body) + 1)]
        try:
            body.decode("utf-8")
            whole = True
        except UnicodeDecodeError:
            whole = False
        monkeypatch.setattr(charset, "VALIDATE_WHOLE_MAX", 0)
        monkeypatch.setattr(charset, "VALIDATE_CHUNK", 1 + round_ % 9)
        assert charset._valid_utf8(body) is whole, (body, charset.VALIDATE_CHUNK)
        outcomes.add(whole)
    assert outcomes == {True, False}


def test_the_piecewise_check_agrees_on_random_page_sized_bodies() -> None:
    """The same at the sizes it runs at: bodies over VALIDATE_WHOLE_MAX, in pieces of VALIDATE_CHUNK."""
    from sluice.extraction import charset

    rng = random.Random(400)
    for _ in range(12):
        text = "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(charset.VALIDATE_WHOLE_MAX // 2))
        base = text.encode()  # one to three bytes a character: pieces end inside characters
        at = rng.randrange(len(base))
        for body in (base, base[:at], base[:at] + b"\xe2\x82" + base[at:], base + b"\xf0\x9f"):
            try:
                body.decode("utf-8")
                whole = True
            except UnicodeDecodeError:
                whole = False
            assert charset._valid_utf8(body) is whole

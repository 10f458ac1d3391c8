"""Sitemaps (sitemaps.org): a ``<urlset>`` of pages or a ``<sitemapindex>`` of sitemaps, parsed safely.

A sitemap is the site's data, parsed in the scheduler: no DTD is ever read, so no entity can
expand (a "billion laughs" document is refused at its DOCTYPE, before any entity is declared)
and no external entity is fetched. expat is driven directly, with handlers only: no tree is built,
and the entries are handed out as each chunk is fed, so memory follows the chunk, not the sitemap.
Only a ``<loc>`` or ``<lastmod>`` that is a direct child of a ``<url>`` or ``<sitemap>`` counts,
so extensions (``<image:loc>`` inside ``<image:image>``) are never taken for pages.
"""

from __future__ import annotations

import re
from calendar import timegm
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from xml.parsers import expat

Kind = Literal["urlset", "sitemapindex"]
_ENTRY = {"urlset": "url", "sitemapindex": "sitemap"}
MAX_TEXT = 4096
"""Characters of a ``<loc>`` or ``<lastmod>`` kept (a URL a run takes is at most 2,048)."""


class SitemapError(ValueError):
    """A document that is not a sitemap a crawler can read; the text says why, and where."""


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<url>`` (a page) or ``<sitemap>`` (a child sitemap): its location as written, and its lastmod."""

    loc: str
    lastmod: str | None = None


class SitemapParser:
    """Feed a sitemap's bytes in chunks; each :meth:`feed` returns the entries its chunk completed."""

    def __init__(self) -> None:
        self.kind: Kind | None = None
        self._depth = 0
        self._field: str | None = None
        self._text: list[str] = []
        self._size = 0
        self._entry: dict[str, str] = {}
        self._done: list[SitemapEntry] = []
        parser = expat.ParserCreate(namespace_separator="}")
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._doctype
        parser.EntityDeclHandler = self._entity
        parser.ExternalEntityRefHandler = self._external
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._chars
        self._parser = parser

    def entries(self, body: bytes, chunk: int = 1 << 20) -> Iterator[SitemapEntry]:
        """Every entry of a whole sitemap, parsed ``chunk`` bytes at a time; :attr:`kind` is set before the first."""
        for start in range(0, len(body), chunk):
            yield from self.feed(body[start : start + chunk])
        yield from self.close()

    def feed(self, data: bytes) -> list[SitemapEntry]:
        self._parse(data, final=False)
        return self._take()

    def close(self) -> list[SitemapEntry]:
        """The last entries; :class:`SitemapError` if the document ended early or was never a sitemap."""
        self._parse(b"", final=True)
        if self.kind is None:
            raise SitemapError("not a sitemap: no <urlset> or <sitemapindex>")
        return self._take()

    def _parse(self, data: bytes, *, final: bool) -> None:
        try:
            self._parser.Parse(data, final)
        except expat.ExpatError as exc:
            why = expat.ErrorString(exc.code) if exc.code is not None else str(exc)
            raise SitemapError(f"not well-formed XML: {why} at line {exc.lineno}, column {exc.offset}") from None

    def _take(self) -> list[SitemapEntry]:
        done, self._done = self._done, []
        return done

    def _doctype(self, name: str, *_: object) -> None:
        if name.lower() == "html":  # a page where a sitemap should be (a "soft 404", a login page)
            raise SitemapError("not a sitemap: an HTML page")
        raise SitemapError("a DOCTYPE: sitemaps need none, and no DTD is read (its entities could expand)")

    def _entity(self, *_: object) -> None:
        raise SitemapError("an entity declaration: no entity is expanded")

    def _external(self, *_: object) -> int:
        raise SitemapError("an external entity: none is fetched")

    def _start(self, name: str, _attributes: dict[str, str]) -> None:
        self._depth += 1
        local = name.rpartition("}")[2]
        if self._depth == 1:
            if local not in _ENTRY:
                raise SitemapError(f"not a sitemap: the root element is <{local}>, not <urlset> or <sitemapindex>")
            self.kind = "urlset" if local == "urlset" else "sitemapindex"
        elif self._depth == 2 and self.kind is not None and local == _ENTRY[self.kind]:
            self._entry = {}
        elif self._depth == 3 and local in ("loc", "lastmod"):
            self._field, self._text, self._size = local, [], 0

    def _closes_entry(self, name: str) -> bool:
        return self.kind is not None and name.rpartition("}")[2] == _ENTRY[self.kind]

    def _chars(self, text: str) -> None:
        if self._field is not None and self._size < MAX_TEXT:
            self._text.append(text)
            self._size += len(text)

    def _end(self, name: str) -> None:
        if self._depth == 3 and self._field is not None:
            self._entry[self._field] = "".join(self._text)[:MAX_TEXT].strip()
            self._field = None
        elif self._depth == 2 and self._closes_entry(name) and (loc := self._entry.get("loc")):
            self._done.append(SitemapEntry(loc, self._entry.get("lastmod") or None))
        self._depth -= 1


_W3C = re.compile(
    r"(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[T ](?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.\d+)?)?(?P<tz>Z|[+-]\d{2}:?\d{2})?)?)?)?"
)
_WESTMOST = timedelta(hours=12)
"""A value without a time zone is read in UTC-12, where its period ends last."""


def lastmod_epoch(value: str | None) -> int | None:
    """The latest epoch second a sitemap's ``<lastmod>`` (W3C Datetime) can mean, or None if it is not one.

    A value names a period as long as its precision: ``2026-12-01`` is that whole day, so it is read
    as the day's last second, in the westernmost time zone when it has none. A page changed after a
    fetch on the day its lastmod names is then fetched again, never skipped.
    """
    if not value:
        return None
    match = _W3C.fullmatch(value.strip())
    if match is None:
        return None
    try:
        return timegm(_latest(*(match[k] for k in ("y", "m", "d", "H", "M", "S", "tz"))).timetuple())
    except (ValueError, OverflowError):  # a month 13, a day 32, the year 9999's end in UTC-12
        return None


def _latest(
    y: str, m: str | None, d: str | None, hour: str | None, minute: str | None, second: str | None, tz: str | None
) -> datetime:
    start = datetime(int(y), int(m or 1), int(d or 1), int(hour or 0), int(minute or 0), int(second or 0))
    if second is not None:
        end = start
    elif minute is not None:
        end = start + timedelta(seconds=59)
    elif d is not None:
        end = start + timedelta(days=1, seconds=-1)
    elif m is not None:
        end = _next_month(start) - timedelta(seconds=1)
    else:
        end = start.replace(year=start.year + 1) - timedelta(seconds=1)
    if tz is None:
        end += _WESTMOST
    elif tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        end -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return end


def _next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)

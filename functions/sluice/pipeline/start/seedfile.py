"""A crawl's seed file (``seeds.file``): one URL per line, streamed, checked line by line.

A seed list of a million URLs in the spec itself took 95 s and 856 MB to validate, more than the
scheduler's memory. In a file it streams: read in ranges of :data:`CHUNK` bytes, each line checked
by the rules of ``seeds.urls`` as it passes, never held whole. Blank lines and lines starting with
``#`` are skipped. The same reader checks a local file (``sluice validate``) and the deployed copy
in the bucket (the scheduler).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from sluice.domain.layout import seeds_key
from sluice.ports import ObjectStore
from sluice.spec import MAX_SEED_URLS, CrawlSpec, check_seed_url

CHUNK = 8 * 1024 * 1024
NAMED_LINES = 20
"""Bad lines of a seed file ``sluice validate`` names; the rest are counted."""


class SeedFileError(ValueError):
    """A seed file that is missing, or holds a line no run can carry; the text names the file and line."""


def object_lines(objects: ObjectStore, key: str) -> Iterator[str]:
    """The lines of an object, read in ranges (a missing object is a :class:`SeedFileError`)."""
    size = objects.size(key)
    if size is None:
        raise SeedFileError(f"no seed file at {objects.location(key)}")
    yield from _lines(objects.get_range(key, start, min(CHUNK, size - start)) for start in range(0, size, CHUNK))


def file_lines(path: Path) -> Iterator[str]:
    """The lines of a local file, read in chunks."""
    with path.open("rb") as handle:
        yield from _lines(iter(lambda: handle.read(CHUNK), b""))


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    rest = b""
    for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line.decode("utf-8", "replace")
    if rest:
        yield rest.decode("utf-8", "replace")


def _checked_lines(lines: Iterable[str], name: str) -> Iterator[tuple[str, str | None]]:
    """Each seed line's URL and what is wrong with it (None when it is a seed), blank lines and comments
    left out: the one rule of what a seed file's line is, for the stream and for the check beside the spec."""
    for number, line in enumerate(lines, start=1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        try:
            check_seed_url(url)
        except ValueError as exc:
            yield url, f"seeds.file {name} line {number}: {exc}"
            continue
        yield url, None


def seed_urls(lines: Iterable[str], name: str) -> Iterator[str]:
    """The seed URLs of a file's lines, each checked; :class:`SeedFileError` names the first bad line."""
    for count, (url, problem) in enumerate(_checked_lines(lines, name), start=1):
        if problem is not None:
            raise SeedFileError(problem)
        if count > MAX_SEED_URLS:
            raise SeedFileError(f"seeds.file {name}: more than the {MAX_SEED_URLS} seeds a run takes")
        yield url


def deployed_seed_urls(objects: ObjectStore, spec: CrawlSpec) -> Iterator[str]:
    """The spec's seed file's URLs from the object store (``seeds/NAME/FILE``), checked as they stream."""
    if spec.seeds.file is None:
        return iter(())
    return seed_urls(object_lines(objects, seeds_key(spec.name, spec.seeds.file)), spec.seeds.file)


def upload_seed_file(objects: ObjectStore, spec: CrawlSpec, specs_dir: Path) -> None:
    """Copy the spec's seed file from beside the spec to where the scheduler reads it (local runs do this)."""
    if spec.seeds.file is None:
        return
    path = specs_dir / spec.seeds.file
    if not path.is_file():
        raise SeedFileError(f"seeds.file {spec.seeds.file}: no such file beside the spec ({path})")
    writer = objects.writer(seeds_key(spec.name, spec.seeds.file), "text/plain")
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                writer.write(chunk)
    except BaseException:
        writer.abort()
        raise
    writer.close()


def check_seed_file(spec: CrawlSpec, specs_dir: Path) -> int:
    """Read the spec's seed file beside it whole, checking every line; how many seeds it holds.

    Raises :class:`SeedFileError` naming the first :data:`NAMED_LINES` bad lines and counting the rest, or when
    the file and the spec's own seeds are more than ``follow.max_pages``.
    """
    if spec.seeds.file is None:
        return 0
    path = specs_dir / spec.seeds.file
    if not path.is_file():
        raise SeedFileError(f"seeds.file {spec.seeds.file}: no such file beside the spec ({path})")
    count, bad = 0, 0
    problems: list[str] = []
    for _, problem in _checked_lines(file_lines(path), spec.seeds.file):
        if problem is None:
            count += 1
            continue
        bad += 1
        if len(problems) < NAMED_LINES:
            problems.append(problem)
    if problems:
        more = f"\n  and {bad - len(problems)} more bad line(s)" if bad > len(problems) else ""
        raise SeedFileError("\n  ".join(problems) + more)
    if count > MAX_SEED_URLS:
        raise SeedFileError(f"seeds.file {spec.seeds.file}: more than the {MAX_SEED_URLS} seeds a run takes")
    if spec.seeds.count() + count > spec.follow.max_pages:
        raise SeedFileError(
            f"seeds.file {spec.seeds.file}: {count} seeds (and {spec.seeds.count()} in the spec) is more than "
            f"follow.max_pages ({spec.follow.max_pages}); raise max_pages or seed fewer pages"
        )
    return count

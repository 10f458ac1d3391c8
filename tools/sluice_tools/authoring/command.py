"""`sluice parse SPEC URL|FILE|RUN:URL` and `sluice shell SPEC URL`: one page against a spec, explained.

Exit status: 0 the page was read and explained, 1 it could not be had (the fetcher's reason is
printed), 2 the spec or the arguments are wrong (each problem named by its spec path, as
`sluice validate` names it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from sluice.extraction.charset import parser_input
from sluice.spec import CrawlSpec, SpecError, load_spec
from sluice_tools.authoring.page import Page, PageUnavailable, SiteReader, from_archive, from_file
from sluice_tools.authoring.show import as_json, as_text
from sluice_tools.authoring.trace import PageTrace, trace_page
from sluice_tools.runner.secrets import MissingSecrets

_HTTP = ("http://", "https://")


class Refused(Exception):
    """Arguments that name no page, or a type the spec does not have."""


@dataclass(frozen=True, slots=True)
class Parsed:
    spec: CrawlSpec
    page: Page
    trace: PageTrace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="the spec file whose rules the page is read by")
    parser.add_argument("page", metavar="URL|FILE|RUN:URL", help="a URL, a saved page, or RUN:URL from a run's archive")
    parser.add_argument("--type", dest="kind", metavar="T", help="take the page for this page type")
    parser.add_argument("--via", metavar="RULE", help="the follow rule whose link led to the page (decides its type)")
    parser.add_argument("--depth", type=int, default=0, help="the page's hops from a seed (default 0: a seed)")
    parser.add_argument("--url", help="the URL a saved FILE stands for (default: the spec's first seed)")
    parser.add_argument("--state", default=".sluice", help="state folder of the run named by RUN:URL")
    parser.add_argument(
        "--ignore-robots", action="store_true", help="fetch the page even where robots.txt disallows it (answer shown)"
    )
    parser.add_argument("--allow-loopback", action="store_true", help="permit 127.0.0.0/8 targets (demo, tests)")


def spec_problems(path: str) -> tuple[CrawlSpec | None, list[str]]:
    """The spec, or the lines `sluice validate` prints for it."""
    try:
        return load_spec(path), []
    except SpecError as exc:
        return None, [f"invalid: {path}", *(f"  {line}" for line in exc.errors)]


def _check_type(spec: CrawlSpec, kind: str | None, via: str | None) -> None:
    if kind is not None:
        if spec.types is None:
            raise Refused(f"--type {kind}: {spec.name} has one page type (extract), not types")
        if kind not in spec.types:
            raise Refused(f"--type {kind}: not a page type of {spec.name} (types: {', '.join(spec.types)})")
    if via is not None:
        rules = [rule for t in (spec.types or {}).values() for rule in t.follow]
        if via not in rules:
            raise Refused(f"--via {via}: no type's follow rules name it (rules: {', '.join(rules) or 'none'})")


def read_page(spec: CrawlSpec, args: argparse.Namespace) -> Parsed:
    """Get the page the arguments name and trace it."""
    _check_type(spec, args.kind, args.via)
    target: str = args.page
    if target.startswith(_HTTP):
        return asyncio.run(_from_site(spec, args))
    if Path(target).is_file():
        url = args.url or next(spec.seeds.iter_urls(), None)
        if url is None:
            raise Refused(f"{target}: give --url, the URL the saved page stands for (the spec lists no seed URL)")
        page = from_file(Path(target), url)
        page = Page(**{**_fields(page), "via": args.via, "depth": args.depth})
        return Parsed(spec, page, _trace(spec, page, args.kind))
    run_id, colon, url = target.partition(":")
    if colon and url.startswith(_HTTP):
        page = from_archive(Path(args.state), run_id, url)
        if args.via is not None:
            page = Page(**{**_fields(page), "via": args.via})
        return Parsed(spec, page, _trace(spec, page, args.kind))
    raise Refused(f"{target}: not an http(s) URL, a file, or RUN:URL")


async def _from_site(spec: CrawlSpec, args: argparse.Namespace) -> Parsed:
    """The page fetched as a run fetches it, then robots.txt's answer for its links, with the same fetcher."""
    reader = SiteReader(spec, allow_loopback=args.allow_loopback, ignore_robots=args.ignore_robots)
    try:
        page = await reader.page(args.page)
        page = Page(**{**_fields(page), "via": args.via, "depth": args.depth})
        trace = _trace(spec, page, args.kind)
        answers = await reader.robots_of(link.url for link in trace.links if link.in_scope and link.url)
        return Parsed(spec, page, _trace(spec, page, args.kind, answers))
    finally:
        await reader.aclose()


def _fields(page: Page) -> dict[str, object]:
    return {name: getattr(page, name) for name in Page.__slots__}


def _trace(spec: CrawlSpec, page: Page, kind: str | None, robots: dict[str, str] | None = None) -> PageTrace:
    html = parser_input(page.body, page.content_type)
    return trace_page(
        spec, page.final_url, html, via=page.via, kind=kind, depth=page.depth, carried_in=page.carry, robots=robots
    )


def load(args: argparse.Namespace, command: str) -> Parsed | int:
    """The spec and the page the arguments name, or the exit status after printing why not."""
    spec, problems = spec_problems(args.spec)
    if spec is None:
        print("\n".join(problems), file=sys.stderr)
        return 2
    try:
        return read_page(spec, args)
    except (Refused, MissingSecrets) as exc:
        print(f"sluice {command}: {exc}", file=sys.stderr)
        return 2
    except PageUnavailable as exc:
        print(f"sluice {command}: {args.page}: {exc}", file=sys.stderr)
        return 1


def parse(args: argparse.Namespace) -> int:
    got = load(args, "parse")
    if isinstance(got, int):
        return got
    page, trace = got.page, got.trace
    print(json.dumps(as_json(page, trace), indent=2, default=str) if args.json else as_text(page, trace))
    return 0


def shell(args: argparse.Namespace) -> int:
    from sluice_tools.authoring.shell import interact

    got = load(args, "shell")
    if isinstance(got, int):
        return got
    interact(got.spec, got.page, got.trace)
    return 0

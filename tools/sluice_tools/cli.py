"""The ``sluice`` command: validate specs, serve the demo site, crawl locally, and operate the runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from sluice import defaults
from sluice.domain.runs import RunInFlight
from sluice.spec import CrawlSpec, SpecError, load_spec
from sluice.spec.columns import field_names
from sluice_tools.ops.commands import add_commands

DEMO_SPEC = Path("crawls/demo-books.yaml")


def _validate(args: argparse.Namespace) -> int:
    from sluice.pipeline.start.seedfile import SeedFileError, check_seed_file

    status = 0
    for path in args.specs:
        try:
            spec = load_spec(path, named_after_file=True)
            seeds_in_file = check_seed_file(spec, Path(path).parent)
        except SpecError as exc:
            status = 1
            print(f"invalid: {path}", file=sys.stderr)
            for line in exc.errors:
                print(f"  {line}", file=sys.stderr)
            continue
        except SeedFileError as exc:
            status = 1
            print(f"invalid: {path}\n  {exc}", file=sys.stderr)
            continue
        follow = spec.follow
        rules = [rule for kind in (spec.types or {}).values() for rule in kind.follow.values()]
        if not follow.selectors and not rules:
            reach = "follows no links"
        elif follow.max_depth is None:
            reach = f"follows links at any depth, up to {follow.max_pages} pages"
        else:
            reach = f"follows links {follow.max_depth} hop(s) from a seed, up to {follow.max_pages} pages"
        seeds = f"{spec.seeds.count() + seeds_in_file} seed(s)"
        if (sitemaps := spec.seeds.sitemaps) is not None:
            robots = " and the sitemaps of the seeds' robots.txt" if sitemaps.from_robots else ""
            seeds += f" + the pages of {len(sitemaps.urls)} sitemap(s){robots}"
        types = ""
        if spec.types is not None:
            shown = ", ".join(f"{name} ({len(kind.extract.fields)})" for name, kind in spec.types.items())
            types = f" in {len(spec.types)} page types: {shown}"
        recrawl = spec.recrawl
        again = (
            f", each page asked again every {recrawl.min_interval_days:g} to {recrawl.max_age_days:g} day(s)"
            if recrawl is not None and recrawl.adaptive
            else ""
        )
        print(
            f"ok: {path} (crawl {spec.name!r}, {seeds}, {reach}, "
            f"{len(field_names(spec))} field(s){types}, schedule {spec.schedule or 'none'}{again})"
        )
        for warning in spec.shadowed_types():
            print(f"  warning: {warning}")
    return status


def _crawl(args: argparse.Namespace) -> int:
    from sluice_tools.crawl.summary import crawl_with_progress
    from sluice_tools.runner.secrets import MissingSecrets, local_credentials

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2
    if spec.seeds.sitemaps is not None:
        print("note: sluice crawl does not read sitemaps (sluice run does): their pages are not seeds", file=sys.stderr)
    try:
        local_credentials(spec)
    except MissingSecrets as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or f"out/{spec.name}.jsonl")
    summary = crawl_with_progress(spec, out, allow_loopback=args.allow_loopback, quiet=args.json)
    text = summary.pop("text")
    print(json.dumps(summary, indent=2) if args.json else text)
    return 0 if summary["records"] else 1


def _demo(args: argparse.Namespace) -> int:
    from sluice_tools.runner.demo import run_demo

    return run_demo(Path(args.spec), Path(args.state), port=args.port)


def _run(args: argparse.Namespace) -> int:
    from sluice.messages import MalformedMessage
    from sluice.pipeline.start.seedfile import SeedFileError
    from sluice_tools.ops.show import local_catalog_verdict
    from sluice_tools.runner.secrets import MissingSecrets
    from sluice_tools.runner.session import FlagsDiffer, StateInUse
    from sluice_tools.runner.summary import as_json, as_text, catalog_lines, local_lines, progress_bar

    try:
        spec = load_spec(args.spec, named_after_file=True)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2
    path, state = Path(args.spec), Path(args.state)
    if not args.allow_loopback:  # refused before a run is opened: skipped page by page, it became the next baseline
        loopback, only = loopback_seeds(spec)
        if only:
            print(
                f"refused: every seed of crawl {spec.name!r} is on loopback (127.0.0.0/8), which is refused unless "
                f"--allow-loopback is given: {', '.join(loopback)} in {path}. Add --allow-loopback to crawl it.",
                file=sys.stderr,
            )
            return 2
        for seed in loopback:
            print(f"note: {seed} is on loopback: its pages are skipped (add --allow-loopback)", file=sys.stderr)

    def say(line: str) -> None:  # on stderr: with --json, stdout is one JSON object
        print(line, file=sys.stderr)

    try:
        with progress_bar(spec.name, enabled=not args.json) as show:
            if args.emulate_aws:
                from sluice_tools.emulate.runner import EmulatedRunner

                emulated = EmulatedRunner(
                    path.parent, state / "moto", workers=args.workers, allow_loopback=args.allow_loopback
                )
                run = emulated.run(spec, progress=show)
            else:
                from sluice_tools.runner.local import LocalFleet
                from sluice_tools.runner.processes import default_processes

                fleet = LocalFleet(
                    path.parent,
                    state,
                    workers=args.workers,
                    processes=args.processes or default_processes(args.workers),
                    batch_messages=args.batch_messages,
                    allow_loopback=args.allow_loopback,
                    say=say,
                )
                run = fleet.run(spec, progress=show, restart=args.restart)
    except (RunInFlight, MalformedMessage, StateInUse, SeedFileError, MissingSecrets, FlagsDiffer) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    catalog = None if args.emulate_aws else local_catalog_verdict(state, run.summary)
    if args.json:
        print(json.dumps(as_json(run), indent=2, sort_keys=True))
        for line in local_lines(run) + [w for w in catalog_lines(run.summary, catalog) if "WARNING" in w]:
            say(line.strip())
    else:
        print(as_text(run, catalog))
    return 0 if run.summary.healthy else 1


def _batch_messages(text: str) -> int:
    """``--batch-messages``' value, or argparse's error (it names the option) saying what it takes."""
    top = defaults.LOCAL_BATCH_MESSAGES_MAX
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= top:
        raise argparse.ArgumentTypeError(f"takes a whole number from 1 to {top}, not {text!r}")
    return value


def loopback_seeds(spec: CrawlSpec) -> tuple[list[str], bool]:
    """The spec's seed fields that name a loopback host (``seeds.template``, ``seeds.urls[0]``...), and whether
    every seed it has is such (a seed file's are not read: a spec with one is never all loopback)."""
    from urllib.parse import urlsplit

    from sluice_tools.demosite.server import is_loopback

    seeds = spec.seeds
    named = [(f"seeds.urls[{i}]", str(url)) for i, url in enumerate(seeds.urls)]
    if seeds.template is not None:
        named.append(("seeds.template", seeds.template))
    if seeds.sitemaps is not None:
        named += [(f"seeds.sitemaps.urls[{i}]", str(url)) for i, url in enumerate(seeds.sitemaps.urls)]
    loopback = [f"{field} ({url})" for field, url in named if is_loopback(urlsplit(url).hostname or "")]
    only = bool(loopback) and len(loopback) == len(named) and seeds.file is None
    return loopback, only


def _start(args: argparse.Namespace) -> int:
    """Start a run of a deployed crawl by invoking the stack's scheduler (uses your AWS credentials)."""
    from sluice.adapters.aws.clients import client
    from sluice_tools.ops.stage import Stage, StageUnreachable, aws_errors

    spec_path = Path(args.specs) / f"{args.crawl}.yaml"
    if spec_path.is_file():  # the spec as deployed from this folder: one only a local run can crawl is refused here
        try:
            loopback, only = loopback_seeds(load_spec(spec_path))
        except SpecError:
            loopback, only = [], False  # the stack's own check says what is wrong with it
        if only:
            print(
                f"sluice start: crawl {args.crawl!r} cannot run on AWS: its seeds are on loopback "
                f"(127.0.0.0/8), which the deployed fetcher refuses: {', '.join(loopback)} in {spec_path}. "
                "Only `sluice run SPEC --allow-loopback` crawls it, on this machine.",
                file=sys.stderr,
            )
            return 2
        for seed in loopback:
            print(f"note: {seed} is on loopback: the deployed fetcher skips its pages", file=sys.stderr)
    function = Stage.named(args.stage).config.scheduler_function
    try:
        with aws_errors(args.stage, f"invoke {function}"):
            answer = client("lambda").invoke(
                FunctionName=function,
                InvocationType="RequestResponse",
                Payload=json.dumps({"crawl": args.crawl}).encode(),
            )
    except StageUnreachable as exc:
        print(f"sluice start: {exc}", file=sys.stderr)
        return 2
    body = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        message = body.get("errorMessage", body) if isinstance(body, dict) else body
        print(f"{function} refused: {message}", file=sys.stderr)
        return 1
    if isinstance(body, dict) and body.get("failed"):
        print(f"{function}: the run could not start: {body['failed']}", file=sys.stderr)
        return 1
    print(json.dumps(body, indent=2))
    return 0


_RST_LITERAL = re.compile(r"``(.+?)``")


def plain(text: str | None) -> str | None:
    """A docstring as ``--help`` prints it: its RST literals (double backticks) as the bare words."""
    return _RST_LITERAL.sub(r"\1", text) if text is not None else None


def version() -> str:
    """The installed package's version (its metadata); from a checkout not installed, pyproject.toml's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("sluice")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description=plain(__doc__))
    parser.add_argument("--version", action="version", version=f"sluice {version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check crawl spec files and name every error")
    validate.add_argument("specs", nargs="+", metavar="SPEC", help="spec files, each named after its crawl")
    validate.set_defaults(run=_validate)

    # Parsed by the demo site itself (see main): listed here for `sluice --help`.
    commands.add_parser("demo-site", help="serve the bundled demo catalogue on 127.0.0.1:8710 (faults: --help)")

    crawl = commands.add_parser("crawl", help="crawl a spec with the engine alone; records to a JSONL file")
    crawl.add_argument("spec", metavar="SPEC", help="the spec file to crawl")
    crawl.add_argument("--out", help="records file (default: out/NAME.jsonl)")
    crawl.add_argument("--allow-loopback", action="store_true", help="permit 127.0.0.0/8 targets (demo, tests)")
    crawl.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    crawl.set_defaults(run=_crawl)

    run = commands.add_parser(
        "run", help="run a crawl through the pipeline on this machine (resumes a run a killed command left)"
    )
    run.add_argument("spec", metavar="SPEC", help="the spec file to run (named after its crawl)")
    run.add_argument("--state", default=".sluice", help="folder that keeps runs, URLs and outputs between runs")
    run.add_argument("--workers", type=int, default=4, help="batches in flight at once (default 4)")
    run.add_argument(
        "--processes",
        type=int,
        default=None,
        help="processes the workers are spread over, each with its own event loop (default: one a core, "
        "at most --workers)",
    )
    run.add_argument(
        "--batch-messages",
        type=_batch_messages,
        default=defaults.LOCAL_BATCH_MESSAGES,
        help=f"messages a worker receives at once, 1-{defaults.LOCAL_BATCH_MESSAGES_MAX} "
        f"(default {defaults.LOCAL_BATCH_MESSAGES}; the stack's SQS batches, and --emulate-aws, take "
        f"{defaults.BATCH_SIZE})",
    )
    run.add_argument(
        "--restart", action="store_true", help="close a run a killed command left (as unfinished) and start anew"
    )
    run.add_argument(
        "--emulate-aws",
        action="store_true",
        help="run the real Lambda handlers on embedded AWS (moto) instead of the local store (slower; no resume; "
        "kept in STATE/moto/, where `sluice show` and `runs` do not read)",
    )
    run.add_argument("--allow-loopback", action="store_true", help="permit 127.0.0.0/8 targets (demo, tests)")
    run.add_argument(
        "--json",
        action="store_true",
        help="print the run's summary.json as it is stored (dead letters, notes and file paths go to stderr)",
    )
    run.set_defaults(run=_run)

    start = commands.add_parser("start", help="start a run of a deployed crawl now (invokes the scheduler)")
    start.add_argument("crawl", metavar="NAME", help="the deployed crawl's name")
    start.add_argument("--stage", default="dev", help="the stack's stage (default dev)")
    start.add_argument(
        "--specs",
        default="crawls",
        help="the specs folder the stack was deployed from: a crawl whose seeds are all on loopback is refused",
    )
    start.set_defaults(run=_start)

    demo = commands.add_parser(
        "demo",
        help="three nightly runs of the demo crawl on the local store and a repair from the archive, told as a story",
    )
    demo.add_argument("--spec", default=str(DEMO_SPEC), help=f"the demo crawl's spec (default {DEMO_SPEC})")
    demo.add_argument("--port", type=int, default=0, help="demo site port (default: any free one)")
    demo.add_argument("--state", default=".sluice/demo", help="state folder (wiped first: the story starts fresh)")
    demo.set_defaults(run=_demo)

    from sluice_tools.authoring.command import add_arguments, parse, shell

    parse_page = commands.add_parser(
        "parse", help="one page against a spec: its type and why, each field step by step, each link and its fate"
    )
    add_arguments(parse_page)
    parse_page.add_argument("--json", action="store_true", help="print one JSON object")
    parse_page.set_defaults(run=parse)
    shell_page = commands.add_parser("shell", help="a Python prompt with one parsed page and css(), field(), links()")
    add_arguments(shell_page)
    shell_page.set_defaults(run=shell)

    add_commands(commands)  # query, runs, show, logs, redrive, reextract
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo-site"]:
        # Everything after `demo-site` belongs to the demo site's own parser (its --help included).
        from sluice_tools.demosite.cli import main as serve

        return serve(arguments[1:])
    args = build_parser().parse_args(arguments)
    try:
        code = int(args.run(args))
        sys.stdout.flush()  # here, where a reader gone away is caught, not at the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """stdout's reader closed it (``sluice runs --json | head``): stop quietly, as a shell's commands do.

    What is still buffered goes to /dev/null, so the interpreter's last flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # 128 + SIGPIPE, what the shell reports for a command a closed pipe stopped


if __name__ == "__main__":
    sys.exit(main())

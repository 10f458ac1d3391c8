"""Where `sluice parse` gets its one page: the site (through the run's own fetcher), a saved file, or a run's archive.

From the site, the page goes through :class:`~sluice.fetch.client.PageFetcher` exactly as a run's
pages do: the address guard, the spec's politeness and body cap, robots.txt, the ``request``
section's headers and secrets (from ``SLUICE_SECRET_<NAME>``, as `sluice run` reads them). robots.txt's
answer is always shown; ``ignore_robots`` fetches the one page even where it disallows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.adapters.local import LocalStore
from sluice.adapters.local.store import DB_NAME
from sluice.domain.pages import url_hash
from sluice.extraction.urls import canonicalize_url
from sluice.fetch.client import PageFetcher
from sluice.fetch.errors import DeferredFetchError
from sluice.fetch.outcomes import Failed, Fetched, NotModified, Skipped
from sluice.pipeline.visit.archive import ArchiveUnreadable, read_response
from sluice.spec import CrawlSpec
from sluice_tools.runner.secrets import local_credentials


class PageUnavailable(Exception):
    """The page could not be had from where it was asked for; the text says why."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page's response, and what the way it came says about it."""

    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes
    source: str
    """``site``, ``file PATH`` or ``archive of run RUN``."""
    robots: str | None = None
    """robots.txt's answer for the page (``allowed``, ``disallows ...``), None when not asked."""
    via: str | None = None
    depth: int = 0
    carry: dict[str, Any] | None = None
    attempts: int = 0


def from_file(path: Path, url: str, content_type: str = "text/html") -> Page:
    """A saved page, standing for ``url``."""
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise PageUnavailable(f"{path}: cannot read: {exc.strerror or exc}") from None
    return Page(url, url, 200, content_type, body, f"file {path}")


def from_archive(state_dir: Path, run_id: str, url: str) -> Page:
    """The response a local run kept of ``url`` (``output.archive``), with the rule and data it came with."""
    if not (state_dir / DB_NAME).is_file():
        raise PageUnavailable(f"no runs in {state_dir}/: `sluice run` keeps its state there (or pass --state)")
    store = LocalStore.open(state_dir)
    try:
        run = store.ledger.find_run(run_id)
        if run is None:
            raise PageUnavailable(f"no run {run_id} in {state_dir}/ (`sluice runs NAME` lists a crawl's runs)")
        try:
            hash_ = url_hash(canonicalize_url(url))
        except ValueError as exc:
            raise PageUnavailable(str(exc)) from None
        entry = store.frontier.entries(run_id, [hash_]).get(hash_)
        if entry is None or entry.result is None:
            raise PageUnavailable(f"run {run_id} has no page {url}")
        if entry.result.archive is None:
            raise PageUnavailable(
                f"run {run_id} kept no response of {url} (output.archive was off, or the page held no records)"
            )
        try:
            answer = read_response(store.objects, run.crawl, entry.result.archive)
        except ArchiveUnreadable as exc:
            raise PageUnavailable(str(exc)) from None
        carry = dict(answer.carry) if answer.carry else (dict(entry.carry) if entry.carry else None)
        return Page(
            url,
            answer.final_url or url,
            answer.status,
            answer.content_type,
            answer.body,
            f"archive of run {run_id}",
            via=answer.via or entry.via,
            depth=entry.depth,
            carry=carry,
        )
    finally:
        store.close()


def robots_answer_text(refusal: str | None) -> str:
    return "allowed" if refusal is None else refusal.removeprefix("robots.txt ")


async def _robots(fetcher: PageFetcher, url: str) -> str:
    try:
        return robots_answer_text(await fetcher.robots.check(url, fetcher.politeness.user_agent))
    except DeferredFetchError as exc:
        return f"unreachable ({exc.reason})"


class SiteReader:
    """Fetches one page, then robots.txt's answer for its links, with one fetcher (closed by :meth:`aclose`)."""

    def __init__(self, spec: CrawlSpec, *, allow_loopback: bool, ignore_robots: bool) -> None:
        self.spec = spec
        self.obeys = spec.politeness.obey_robots
        politeness = spec.politeness.model_copy(update={"obey_robots": self.obeys and not ignore_robots})
        self.ignore_robots = ignore_robots
        self.fetcher = PageFetcher(politeness, allow_loopback=allow_loopback, credentials=local_credentials(spec))

    async def aclose(self) -> None:
        await self.fetcher.aclose()

    async def page(self, url: str) -> Page:
        """The page as a run would fetch it; PageUnavailable with the fetcher's reason when it would not."""
        answer = None
        if self.obeys:
            answer = await _robots(self.fetcher, url)
            if answer != "allowed" and self.ignore_robots:
                answer += " (not obeyed for this page: --ignore-robots)"
        outcome = await self.fetcher.fetch(url)
        match outcome:
            case Fetched():
                return Page(
                    url,
                    outcome.final_url,
                    outcome.status,
                    outcome.content_type,
                    outcome.body,
                    "site",
                    answer,
                    attempts=outcome.attempts,
                )
            case Skipped():
                hint = " (targets on 127.0.0.0/8 need --allow-loopback)" if "loopback" in outcome.reason else ""
                raise PageUnavailable(f"skipped: {outcome.reason}{hint}")
            case Failed():
                raise PageUnavailable(f"failed after {outcome.attempts} attempt(s): {outcome.reason}")
            case NotModified():  # never: no validators are sent
                raise PageUnavailable("answered 304 to a request without validators")

    async def robots_of(self, urls: Iterable[str]) -> dict[str, str]:
        """robots.txt's answer per URL (nothing when the spec does not obey robots.txt)."""
        if not self.obeys:
            return {}
        return {url: await _robots(self.fetcher, url) for url in dict.fromkeys(urls)}

"""Links stay plain URLs until they are claimed (pipeline/visit/links.py): a page's links cost a task and a hash
only when the run may not hold them yet.

On a link-heavy site most of a page's links (a sidebar every page of a section shares) were claimed by an
earlier page. Building each link's task (a validated model) and its URL hash for every page, at visit time,
was about half of ``sluice run``'s CPU on the docs site. These tests count what a page costs (tasks made, URL
hashes taken, lookups asked) and check that the claims, sends and counts stay as they were: each new link
claimed once, on the local store and on the AWS path alike, exactly once on redelivery, the cap kept.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.adapters.local import LocalStore
from sluice.domain.layout import frontier_key
from sluice.domain.pages import url_hash
from sluice.domain.runs import RunState
from sluice.domain.seedset import SeedSet
from sluice.fetch.outcomes import Fetched, Validators
from sluice.messages import UrlTask
from sluice.pipeline.services import Tuning
from sluice.pipeline.visit import links as links_module
from sluice.pipeline.visit.container import Container
from sluice.pipeline.visit.links import ClaimCache, parent_id
from sluice.pipeline.visit.page_results import Visit, fetched_visit
from sluice.pipeline.visit.writer import ChunkWriter
from sluice.spec import parse_spec
from sluice_tools.demosite import running_demo_site

from .conftest import Pipeline

SITE = "https://docs.example"
SEED = f"{SITE}/index.html"
RUN_ID = "20261201T000000Z-abcdef"
NOW = 1_796_000_000
SIDEBAR = [f"{SITE}/page-{n}.html" for n in range(200)]


def spec_data(max_pages: int = 5000) -> dict[str, Any]:
    return {
        "name": "claims",
        "seeds": [SEED],
        "follow": {"selectors": ["nav"], "max_depth": 4, "max_pages": max_pages},
        "extract": {"fields": {"title": {"selector": "h1", "required": True}}},
    }


def html(title: str, hrefs: list[str]) -> bytes:
    anchors = "".join(f'<a href="{h}">{n}</a>' for n, h in enumerate(hrefs))
    return f"<html><body><h1>{title}</h1><nav>{anchors}</nav></body></html>".encode()


def task(url: str, depth: int = 1, parent: str | None = None) -> UrlTask:
    return UrlTask(url=url, depth=depth, origin="link", parent=parent)


class Counts:
    """What claiming costs, counted where it is paid: tasks made, URL hashes taken by the claim path, lookups."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tasks = 0
        self.hashes = 0
        made = UrlTask.__init__
        hashed = url_hash

        def counted_task(task: UrlTask, **data: Any) -> None:
            self.tasks += 1
            made(task, **data)

        def counted_hash(url: str) -> str:
            self.hashes += 1
            return hashed(url)

        monkeypatch.setattr(UrlTask, "__init__", counted_task)
        monkeypatch.setattr(links_module, "url_hash", counted_hash)

    def reset(self) -> None:
        self.tasks = self.hashes = 0


class Chunks:
    """One run on the local store, written a chunk at a time as a batch's writer writes it."""

    def __init__(self, folder: Path, max_pages: int = 5000) -> None:
        self.store = LocalStore.open(folder)
        tuning = Tuning()
        self.services = self.store.services(
            folder / "crawls", tuning, finalize_later=lambda _: None, continue_start=lambda _: None
        )
        self.spec = parse_spec(spec_data(max_pages))
        self.run = RunState(
            crawl="claims", run_id=RUN_ID, status="running", started_at="x", deadline="y", spec_digest="z", seeds=1
        )
        self.services.objects.put(frontier_key("claims", RUN_ID), SeedSet.of([url_hash(SEED)]).to_bytes(), "")
        self.container = Container(allow_loopback=True)
        self.lookups: list[int] = []
        entries = self.store.frontier.entries

        def counted_entries(run_id: str, hashes: Any) -> Any:
            self.lookups.append(len(hashes))
            return entries(run_id, hashes)

        setattr(self.store.frontier, "entries", counted_entries)  # noqa: B010 - an instance's method, counted

    def visit(self, url: str, hrefs: list[str], *, depth: int = 1, parent: str | None = None) -> Visit:
        return self.visit_task(UrlTask(url=url) if depth == 0 else task(url, depth, parent), hrefs)

    def visit_task(self, task: UrlTask, hrefs: list[str]) -> Visit:
        url = task.url
        page = Fetched(url, url, 200, "text/html", html(url, hrefs), Validators(None, None), 1, 0.01)
        return fetched_visit(self.spec, task, None, page, NOW)

    def write(self, visits: list[Visit]) -> int:
        writer = ChunkWriter(self.services, self.container, self.run, self.spec, None, {})
        return writer(visits).claimed

    def sent(self) -> list[UrlTask]:
        """Every task sent to the queue so far, in order."""
        tasks: list[UrlTask] = []
        for _ in range(1000):
            got = self.store.queue.receive(RUN_ID, 10, 60.0)
            if not got:
                return tasks
            for message in got:
                tasks += [UrlTask.model_validate(t) for t in json.loads(message.body)["tasks"]]
            self.store.queue.delete([m.receipt_handle for m in got])  # a host's group is held until then
        raise AssertionError("queue not drained")


@pytest.fixture
def chunks(tmp_path: Path) -> Iterator[Chunks]:
    made = Chunks(tmp_path)
    yield made
    made.store.close()


def test_a_page_whose_links_an_earlier_page_claimed_makes_no_task_and_no_hash(
    chunks: Chunks, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert chunks.write([chunks.visit(SEED, SIDEBAR, depth=0)]) == 200
    tasks = [task(url, 1, parent_id(SEED)) for url in SIDEBAR[:10]]
    counts = Counts(monkeypatch)
    lookups = len(chunks.lookups)
    assert chunks.write([chunks.visit_task(t, SIDEBAR) for t in tasks]) == 0
    # Two hashes a page (its own name as a parent, at visit and at write), none for its links; no task; no
    # lookup. It was 200 tasks (at visit time) and 200 more hashes (at claim time) a page.
    assert (counts.tasks, counts.hashes, len(chunks.lookups) - lookups) == (0, 20, 0)


def test_only_the_new_links_of_a_page_become_tasks(chunks: Chunks, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks.write([chunks.visit(SEED, SIDEBAR, depth=0)])
    chunks.sent()
    new = [f"{SITE}/new-{n}.html" for n in range(3)]
    page = task(SIDEBAR[0], 1, parent_id(SEED))
    counts = Counts(monkeypatch)
    assert chunks.write([chunks.visit_task(page, [*SIDEBAR, *new])]) == 3
    assert (counts.tasks, counts.hashes) == (3, 2 + 3)
    assert chunks.lookups[-1] == 3  # the run is asked about the three it may not hold, not the 200 it does
    expected = [UrlTask(url=u, depth=2, origin="link", parent=parent_id(SIDEBAR[0])) for u in new]
    assert chunks.sent() == expected


def test_the_claims_and_sends_are_those_a_task_per_link_made(chunks: Chunks) -> None:
    hrefs = [*SIDEBAR[:5], SIDEBAR[0], f"{SITE}/page-1.html#part", SEED]  # a repeat, a fragment, the seed itself
    assert chunks.write([chunks.visit(SEED, hrefs, depth=0)]) == 5
    expected = [UrlTask(url=u, depth=1, origin="link", parent=parent_id(SEED)) for u in SIDEBAR[:5]]
    assert chunks.sent() == expected
    held = chunks.store.frontier.entries(RUN_ID, [url_hash(u) for u in [*SIDEBAR[:5], SEED]])
    claimed = [e for e in held.values() if e.url != SEED]
    assert sorted(e.url for e in claimed) == SIDEBAR[:5]
    assert {(e.depth, e.origin, e.parent) for e in claimed} == {(1, "link", parent_id(SEED))}
    assert held[url_hash(SEED)].origin == "seed"  # counted as the seed it is, never claimed


def test_a_link_to_a_seed_is_hashed_once_and_never_claimed(chunks: Chunks, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [task(url, 1, parent_id(SEED)) for url in SIDEBAR[:20]]
    counts = Counts(monkeypatch)
    for page in tasks:
        assert chunks.write([chunks.visit_task(page, [SEED])]) == 0
    assert counts.hashes == 2 * 20 + 1  # each page's own name twice, and the seed once (it was once a page)
    assert chunks.lookups == []
    assert chunks.sent() == []


def test_the_claim_cache_forgets_its_oldest_links_past_its_bound_of_links() -> None:
    cache = ClaimCache(limit=3)
    for n in range(3):
        cache.remember(f"{SITE}/{n}", "a" * 16)
    assert cache.settled(f"{SITE}/0", "b" * 16)  # used again: now the newest
    cache.remember(f"{SITE}/3", "a" * 16)
    assert len(cache) == 3
    assert [cache.known(f"{SITE}/{n}") for n in range(4)] == [True, False, True, True]


def test_the_claim_cache_forgets_its_oldest_links_past_its_bound_of_characters() -> None:
    cache = ClaimCache(limit=1000, chars=100)
    urls = [f"{SITE}/{'x' * 20}/{n:02}" for n in range(10)]  # 44 characters each
    for url in urls:
        cache.remember(url, "a" * 16)
        cache.remember(url, "a" * 16)  # remembered again: counted once
        assert cache.chars <= 100
    assert (len(cache), cache.chars) == (2, 88)
    assert [cache.known(u) for u in urls[-3:]] == [False, True, True]


def test_a_redelivered_page_sends_again_only_its_own_waiting_links_and_counts_once(chunks: Chunks) -> None:
    other = f"{SITE}/other.html"
    chunks.write([chunks.visit(other, SIDEBAR[:2], parent=parent_id(SEED))])  # claims page-0 and page-1
    first = chunks.visit(SIDEBAR[5], SIDEBAR[:4], parent=parent_id(SEED))
    assert chunks.write([first]) == 2  # page-2 and page-3
    chunks.sent()
    again = chunks.visit(SIDEBAR[5], SIDEBAR[:4], parent=parent_id(SEED))  # the same message, delivered again
    assert chunks.write([again]) == 0
    mine = parent_id(SIDEBAR[5])
    assert chunks.sent() == [
        UrlTask(url=u, depth=2, origin="link", parent=mine, again=True) for u in SIDEBAR[2:4]
    ]  # not page-0 nor page-1: the other page claimed them
    held = chunks.store.frontier.entries(RUN_ID, [url_hash(SIDEBAR[5])])
    assert [e.done for e in held.values()] == [True]
    assert chunks.services.frontier.progress(RUN_ID).done == 2  # other.html and page-5, once each


def test_the_cap_on_links_is_kept_and_counted_on_the_pages_it_cut(tmp_path: Path) -> None:
    chunks = Chunks(tmp_path, max_pages=6)  # the seed and five links
    try:
        first = chunks.visit(SEED, SIDEBAR[:10], depth=0)
        second = chunks.visit(SIDEBAR[0], SIDEBAR[:10], parent=parent_id(SEED))
        assert chunks.write([first]) == 5
        assert chunks.write([second]) == 0
        assert [t.url for t in chunks.sent()] == SIDEBAR[:5]
        held = chunks.store.frontier.entries(RUN_ID, [url_hash(u) for u in (SEED, SIDEBAR[0])])
        capped = {e.url: e.result.capped_links for e in held.values() if e.result is not None}
        assert capped == {SEED: 5, SIDEBAR[0]: 5}
    finally:
        chunks.store.close()


def docs_spec(base_url: str) -> dict[str, Any]:
    """crawls/demo-docs.yaml aimed at ``base_url``."""
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "crawls" / "demo-docs.yaml").read_text())
    port = base_url.rsplit(":", 1)[1]
    text = json.dumps(shipped).replace("http://127.0.0.1:8710", base_url).replace(r"1:8710", "1:" + port)
    data: dict[str, Any] = json.loads(text)
    data["name"] = "docs"
    data["politeness"] |= {"concurrency": 4, "concurrency_per_domain": 4}
    return data


DOCS = 60
"""Articles of the docs site here: one section, 62 pages in all, each article linking to every other page."""


def claims_counted(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every link passed to the frontier's claim (one conditional write each on DynamoDB), by URL."""
    frontier = type(pipeline.services.frontier)
    real: Callable[..., Any] = frontier.claim
    asked: Counter[str] = Counter()

    def claim(self: Any, run_id: str, tasks: list[UrlTask], **kw: Any) -> Any:
        asked.update(t.url for t in tasks)
        return real(self, run_id, tasks, **kw)

    monkeypatch.setattr(frontier, "claim", claim)
    return asked


@pytest.mark.parametrize("redelivered", [False, True])
def test_each_new_link_of_a_link_heavy_site_is_claimed_once_on_both_paths(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, redelivered: bool
) -> None:
    with running_demo_site(books=20, docs_pages=DOCS) as site:
        pipeline.configure(urls_per_message=5)
        pipeline.spec(docs_spec(site.base_url))
        run_id = pipeline.start("docs")
        asked = claims_counted(pipeline, monkeypatch)
        counts = Counts(monkeypatch)
        if redelivered:  # the index's message delivered twice: its links are found and sent twice
            first = pipeline.receive(1)
            assert pipeline.deliver(first) == set()
            pipeline.send_raw(first[0].body)
        pipeline.drain()
        pipeline.finalize()

    t = pipeline.tally("docs", run_id)
    assert (t.seeds, t.links, t.done, t.failed, t.pending) == (1, DOCS + 1, DOCS + 2, 0, 0)
    assert len(asked) == DOCS + 1  # every page but the seed: the seed is never claimed
    assert max(asked.values()) == 1  # each new link asked once
    records = pipeline.records("docs", run_id)
    assert len(records) == len({r["_key"] for r in records}) == DOCS
    # A task for each link claimed (and each re-sent), not one per link per page: 62 pages x 61 links was 3,782.
    assert counts.tasks <= 2 * (DOCS + 1)

"""Start a run: take the crawl's lock, plan the run's seeds, fan them into the queue.

A run starts from everything the crawl knows, as Nutch's generate step does: the spec's seeds
plus every page of the catalog run (the crawl's last finished run), each with what that run
learned of it (validators, body hash, record digests). So a nightly run asks "changed since?"
of every known page at once, and links are claimed only for pages nobody knew. A page that
answered 404 or 410 leaves the catalog; one the spec's scope no longer allows is not seeded.

The seed set (the run's seed URL hashes) is written before any seed is sent: fetchers never
claim a link that is a seed. The fan-out proceeds in chunks and stops while it has time left;
the caller continues it from ``offset`` in a fresh invocation. Until the fan-out completes the
run is seeding: however fast the fetchers catch up, it is not done. Each host has at most
``host_backlog_messages`` messages in the queue; its seeds past that follow in waves from S3
(:mod:`sluice.pipeline.start.backlog`), so no host's backlog hides the others from SQS FIFO.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import chain, islice

from sluice.domain.layout import frontier_key
from sluice.domain.pages import Prior, UrlEntry, url_hash, url_number
from sluice.domain.runs import RunState, catalog_fresh, drained
from sluice.domain.seedset import SeedSet
from sluice.extraction.urls import Scope, canonicalize_url
from sluice.messages import PriorState, StartEvent, UrlTask
from sluice.observability import logger
from sluice.pipeline.finalize.driver import finalize_run
from sluice.pipeline.finalize.output import PageIndex, load_index
from sluice.pipeline.services import Services
from sluice.pipeline.start.backlog import HostBacklog, in_order
from sluice.pipeline.start.catalogplan import PlanWriter, StoredPlan
from sluice.pipeline.start.seedfile import SeedFileError, deployed_seed_urls
from sluice.pipeline.start.sitemapseeds import SitemapSeeds
from sluice.spec import CrawlSpec

CHUNK = 1_000
"""Seed tasks sent per step: 100 messages, 10 SQS requests."""
RECORD_EVERY_S = 5.0
"""How often the fan-out records how far it got (the run item takes a write at most this often)."""
INLINE_KEPT = 20_000
"""The spec's listed and templated seeds a plan keeps canonical once it has made them (about 150 bytes each):
the plan walks them three or four times (its own seeds, the seed set, the tasks, a seed file's check), and
canonicalizing is most of a walk. A longer list (a template's range past it) is made again each walk, so the
plan's memory stays bounded whatever the spec."""


@dataclass(frozen=True, slots=True)
class StartResult:
    crawl: str
    run_id: str
    offset: int
    """Seed tasks handled so far (all of them when ``complete``)."""
    total: int
    enqueued: int
    complete: bool
    catalog_run: str | None = None


class StartFailed(Exception):
    """A start that opened its run and then met input it cannot use; the run is closed, its lock released.

    Not retried: the same start would meet the same input again.
    """

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


def start_run(event: StartEvent, services: Services, *, time_left: Callable[[], float]) -> StartResult:
    """Open a run (or continue one's fan-out) and enqueue seeds until done or ``time_left()`` runs low.

    Raises :class:`StartFailed` when the run cannot go on for its input (the run is closed first, so
    the crawl's lock never outlives a failed start). Errors of the services (throttling, a network
    fault) propagate with the lock held: a retried start resumes the run it opened.
    """
    spec = services.spec(event.crawl)
    run, retried = _open_or_resume(event, services, spec)
    try:
        return _fan_out(event, services, spec, run, retried, time_left)
    except ValueError as exc:
        why = f"start failed: {exc}"[:1000]
        logger.exception("start failed: closing the run", extra={"crawl": spec.name, "run_id": run.run_id})
        finalize_run(spec.name, run.run_id, services, force=True, stopped=why)
        raise StartFailed(f"crawl {spec.name!r} run {run.run_id}: {why}", run.run_id) from exc


def _fan_out(
    event: StartEvent,
    services: Services,
    spec: CrawlSpec,
    run: RunState,
    retried: bool,
    time_left: Callable[[], float],
) -> StartResult:
    plan = SeedPlan(services, spec, run)
    offset = max(event.offset, run.fanned_out)
    if plan.unread_sitemaps:
        if offset > 0:
            raise ValueError("the pages the run's sitemaps listed are gone from its work prefix: start a new run")
        plan.read_sitemaps(time_left)
    total = _store_seed_set(services, spec, run, plan) if offset == 0 else run.seeds
    enqueued = 0
    tasks: Iterator[UrlTask] = islice(plan.tasks(), offset, None)
    if offset > event.offset or retried or event.resumed:
        # A fan-out that died part-way: what it sends now may have been sent already.
        tasks = (t.model_copy(update={"again": True}) for t in tasks)
    tuning = services.tuning
    cap = tuning.host_backlog_messages * tuning.urls_per_message
    # A fan-out retried after it completed has nothing left to route, nor any state to resume.
    backlog = (
        HostBacklog.resume(spec.name, run.run_id, services.objects, cap, offset)
        if offset < total
        else HostBacklog(spec.name, run.run_id, services.objects, cap)
    )
    started = recorded = time.monotonic()
    for sends, chunk in enumerate(in_order(tasks, CHUNK), start=1):
        now = backlog.route(chunk)
        if now:
            services.queue.send(spec.name, run.run_id, now)
        offset += len(chunk)
        enqueued += len(now)
        if backlog.cap <= 0 and time.monotonic() - recorded >= RECORD_EVERY_S:
            # (A capped fan-out records where it got only with its hosts' state, when it hands over.)
            services.ledger.fanned_out(spec.name, run.run_id, offset)
            recorded = time.monotonic()
        step = (time.monotonic() - started) / sends  # a send's time: its chunk is at most CHUNK tasks
        if offset < total and time_left() < max(60.0, 4 * step):
            backlog.save(offset)  # before the offset that names it is recorded
            services.ledger.fanned_out(spec.name, run.run_id, offset)
            services.continue_start({"crawl": spec.name, "run_id": run.run_id, "offset": offset})
            logger.info("fan-out continues", extra={"crawl": spec.name, "run_id": run.run_id, "offset": offset})
            return StartResult(spec.name, run.run_id, offset, total, enqueued, complete=False)
    enqueued += _send_held(services, spec, run, backlog, enqueued)
    _fanned_out(services, spec, run, offset, total)
    return StartResult(spec.name, run.run_id, offset, total, enqueued, complete=True, catalog_run=run.catalog_run)


def _store_seed_set(services: Services, spec: CrawlSpec, run: RunState, plan: SeedPlan) -> int:
    """The run's seed set stored and counted before any seed is sent (a retried start writes the same set
    again: it is deterministic); how many seeds it holds."""
    seeds = plan.seed_set()
    services.objects.put(frontier_key(spec.name, run.run_id), seeds.to_bytes(), "application/octet-stream")
    services.ledger.set_seeds(spec.name, run.run_id, len(seeds))
    logger.info(
        "seeds planned",
        extra={
            "crawl": spec.name,
            "run_id": run.run_id,
            "seeds": len(seeds),
            "catalog_run": run.catalog_run,
            "sitemap_pages": plan.sitemaps.count if plan.sitemaps is not None else None,
        },
    )
    return len(seeds)


def _send_held(services: Services, spec: CrawlSpec, run: RunState, backlog: HostBacklog, enqueued: int) -> int:
    """Each host's held task sent, once every chunk is written (only then may a task point at one: each
    host's held task points at its first); how many were sent."""
    held = backlog.finish()
    for send in in_order(held, CHUNK):
        services.queue.send(spec.name, run.run_id, send)
    if backlog.chunks_written:
        logger.info(
            "host backlogs spilled",
            extra={
                "crawl": spec.name,
                "run_id": run.run_id,
                "hosts": sum(1 for t in held if t.backlog is not None),
                "chunks": backlog.chunks_written,
                "queued": enqueued + len(held),
            },
        )
    return len(held)


def _fanned_out(services: Services, spec: CrawlSpec, run: RunState, offset: int, total: int) -> None:
    """The fan-out recorded complete; the finalizer asked if the fetchers drained the run meanwhile."""
    services.ledger.fanned_out(spec.name, run.run_id, offset)
    if offset != total:
        # The catalog moved between the plan and the sends (a late write to a finished run): the run
        # counts the seeds it sent, not the ones it planned, or it could never drain.
        services.ledger.set_seeds(spec.name, run.run_id, offset)
        logger.warning("seeds sent differ from seeds planned", extra={"crawl": spec.name, "sent": offset})
    logger.info("fan-out complete", extra={"crawl": spec.name, "run_id": run.run_id, "seeds": offset})
    seeded = services.ledger.seeded(spec.name, run.run_id)
    if seeded is not None and drained(seeded, lambda: services.frontier.progress(run.run_id)):
        # The fetchers finished every page while the fan-out was still under way: none of them will ask.
        services.finalize_later({"crawl": spec.name, "run_id": run.run_id})


def _retried_run(event: StartEvent, services: Services, spec: CrawlSpec) -> str | None:
    """The run a retried start opened (Lambda retries a failed start with the same trigger)."""
    if event.run_id is not None or event.trigger is None:
        return None
    lock = services.ledger.active_run(spec.name)
    return lock.run_id if lock is not None and lock.trigger == event.trigger else None


def _open_or_resume(event: StartEvent, services: Services, spec: CrawlSpec) -> tuple[RunState, bool]:
    """The run to fan out, and whether this is a retried start resuming the run it opened."""
    ledger = services.ledger
    run_id = event.run_id
    retried = False
    if run_id is None and (held := _retried_run(event, services, spec)) is not None:
        # Lambda retried a start that died mid-fan-out: the run it opened is this start's own.
        run_id, retried = held, True
        logger.warning("start retried: resuming its run", extra={"crawl": spec.name, "run_id": run_id})
    if run_id is not None:
        run = ledger.get_run(spec.name, run_id)
        if run is None:
            raise LookupError(f"run {run_id} of crawl {spec.name!r} does not exist")
        return run, retried
    lock = ledger.active_run(spec.name)
    if lock is not None and lock.overdue_at(services.clock.now()):
        # The lock's run is past its deadline: close it (as unfinished) before taking its place, or it
        # would stay open with no lock for the sweep to find it by.
        logger.warning("closing an overdue run first", extra={"crawl": spec.name, "run_id": lock.run_id})
        finalize_run(spec.name, lock.run_id, services, force=True)
    catalog = catalog_run(services, spec.name)
    deadline = timedelta(hours=services.tuning.run_deadline_hours)
    run = ledger.open_run(
        spec.name,
        spec.digest(),
        deadline,
        trigger=event.trigger,
        catalog_run=catalog.run_id if catalog else None,
        now=services.clock.now(),
    )
    logger.info("run opened", extra={"crawl": spec.name, "run_id": run.run_id, "catalog_run": run.catalog_run})
    return run, False


def catalog_run(services: Services, crawl: str) -> RunState | None:
    """The crawl's last complete run, if it is recent enough that its URL entries are all still there.

    Complete: an unfinished run (finalized as it stood at its deadline) has no entry for the seeds it
    never reached, so seeding from it would drop them.
    """
    latest = services.ledger.latest_finished(crawl, complete=True)
    if latest is None:
        return None
    if not catalog_fresh(latest, services.clock.now(), services.tuning.catalog_max_age_days):
        logger.info("catalog run too old: starting from the spec's seeds", extra={"crawl": crawl, "run": latest.run_id})
        return None
    return latest


class SeedPlan:
    """The run's seed tasks as one deterministic stream, and the set of their URL hashes.

    Deterministic, so a continuation (or a retried start) skips exactly what was sent. Memory
    stays at 8 bytes per seed: the catalog is streamed from its store once, never held, and the
    tasks that scan makes are kept in S3 for the sends (:mod:`sluice.pipeline.start.catalogplan`). The
    sitemaps' pages come from what the run's first start read and stored (:meth:`read_sitemaps`),
    never from the sites again, with the lastmod each task carries.
    """

    def __init__(self, services: Services, spec: CrawlSpec, run: RunState) -> None:
        self.services, self.spec, self.run = services, spec, run
        self.scope = Scope.from_spec(spec)
        self._inline: list[str] | None = None
        """The spec's inline seeds, canonical, once a walk of them went to its end (:meth:`_inline_urls`)."""
        self.own = SeedSet.of(url_hash(u) for u in self._own_urls())
        """The spec's own seeds (urls, template, file): the sitemaps' pages add to them."""
        self.sitemaps: SitemapSeeds | None = None
        self._spec_seeds = self.own
        if spec.seeds.sitemaps is not None:
            self._use(SitemapSeeds.load(services.objects, spec.name, run.run_id))
        self._catalog: RunState | None = None
        if run.catalog_run is not None:
            self._catalog = services.ledger.get_run(spec.name, run.catalog_run)
        # Records are reused only if the same spec would extract the same records, and only for pages
        # whose whole block the catalog run's output holds (its page index says which).
        self._reuse = self._catalog is not None and self._catalog.spec_digest == spec.digest()
        self._index = load_index(services.objects, spec.name, run.catalog_run) if self._reuse else PageIndex()
        self._schedule = spec.recrawl.schedule() if spec.recrawl is not None else None

    @property
    def _catalog_room(self) -> int:
        return max(0, self.spec.follow.max_pages - len(self._spec_seeds))

    @property
    def unread_sitemaps(self) -> bool:
        """The spec has sitemaps and this run has not read them yet (its first start reads them)."""
        return self.spec.seeds.sitemaps is not None and self.sitemaps is None

    def read_sitemaps(self, time_left: Callable[[], float]) -> None:
        """Read the spec's sitemaps once for the run and store what they list; the plan then holds their pages."""
        from sluice.pipeline.start.sitemaps import read_run_sitemaps  # the HTTP stack, only for specs that need it

        read_run_sitemaps(self.services, self.spec, self.run.run_id, self.own, time_left)
        self._use(SitemapSeeds.load(self.services.objects, self.spec.name, self.run.run_id))

    def _use(self, sitemaps: SitemapSeeds | None) -> None:
        self.sitemaps = sitemaps
        if sitemaps is not None:
            listed = (url_number(url_hash(u)) for u in sitemaps.urls())
            self._spec_seeds = SeedSet.of_numbers(chain(self.own.numbers(), listed))

    def _lastmod(self, number: int) -> int | None:
        return self.sitemaps.lastmod(number) if self.sitemaps is not None else None

    def _spec_urls(self) -> Iterator[str]:
        yield from self._own_urls()
        if self.sitemaps is not None:
            for url in self.sitemaps.urls():  # canonical and distinct already; a spec's own seed is sent once
                if not self.own.has_number(url_number(url_hash(url))):
                    yield url

    def _own_urls(self) -> Iterator[str]:
        yield from self._inline_urls()
        if self.spec.seeds.file is not None:
            # A seed file may list a URL the spec lists or its template makes: sent once, counted once.
            yield from self._file_urls(SeedSet.of(url_hash(u) for u in self._inline_urls()))

    def _inline_urls(self) -> Iterator[str]:
        """The spec's listed URLs and its template's, canonical, each once (kept from the first whole walk when
        there are at most :data:`INLINE_KEPT`)."""
        if self._inline is not None:
            yield from self._inline
            return
        kept: list[str] | None = []
        for url in self._canonical_inline():
            if kept is not None:
                kept.append(url)
                if len(kept) > INLINE_KEPT:
                    kept = None
            yield url
        if kept is not None:  # the walk went to its end: the list is whole
            self._inline = kept

    def _canonical_inline(self) -> Iterator[str]:
        listed: set[str] = set()
        for url in self.spec.seeds.urls:  # an explicit list may repeat itself; a template range does not
            canonical = canonicalize_url(url)
            if canonical not in listed:
                listed.add(canonical)
                yield canonical
        if self.spec.seeds.template is not None:
            for url in islice(self.spec.seeds.iter_urls(), len(self.spec.seeds.urls), None):
                canonical = canonicalize_url(url)
                if canonical not in listed:  # a template yields each URL once; the list may repeat one
                    yield canonical

    def _file_urls(self, inline: SeedSet) -> Iterator[str]:
        """The seed file's URLs, streamed, each once and none the spec itself seeds (8-byte hashes remembered:
        the spec's in a sorted array, the file's in a set, ~60 bytes a seed at most)."""
        seen: set[int] = set()
        total = len(inline)
        for url in deployed_seed_urls(self.services.objects, self.spec):
            canonical = canonicalize_url(url)
            number = url_number(url_hash(canonical))
            if number in seen or inline.has_number(number):
                continue
            seen.add(number)
            total += 1
            if total > self.spec.follow.max_pages:
                raise SeedFileError(
                    f"seeds.file {self.spec.seeds.file}: more seeds than follow.max_pages "
                    f"({self.spec.follow.max_pages}); raise max_pages or seed fewer pages"
                )
            yield canonical

    def _catalog_entries(self) -> Iterator[tuple[UrlEntry, bool]]:
        """Usable catalog entries in hash order, each with whether it is one of the spec's seeds."""
        if self._catalog is None:
            return
        extra = 0
        # A finished run's entries no longer change: eventually consistent reads, at half the price.
        for entry in self.services.frontier.scan(self._catalog.run_id, consistent=False):
            result = entry.result
            if result is not None and result.gone:
                continue
            if not self.scope.allows(entry.url) or entry.depth > self.spec.follow.depth_limit:
                continue
            is_seed = self._spec_seeds.has_number(url_number(entry.url_hash))
            if not is_seed:
                if extra >= self._catalog_room:
                    continue
                extra += 1
            yield entry, is_seed

    def seed_set(self) -> SeedSet:
        """The run's seed set, from the one scan of the catalog, which also stores the catalog's tasks for
        :meth:`tasks` (its URL entries read once from DynamoDB, not twice)."""
        numbers: list[int] = []
        if self._catalog is None:
            return SeedSet.of_numbers(list(self._spec_seed_numbers()))
        plan = PlanWriter(self.services.objects, self.spec.name, self.run.run_id)
        for entry, is_seed in self._catalog_entries():
            if not is_seed:
                numbers.append(url_number(entry.url_hash))
            plan.add(self._task(entry, is_seed), after_linking_pages=self._carries and self._carried_to(entry))
        plan.finish()
        return SeedSet.of_numbers([*numbers, *self._spec_seed_numbers()])

    def _spec_seed_numbers(self) -> Iterator[int]:
        return (url_number(url_hash(u)) for u in self._spec_urls())

    def _ordered_catalog(self) -> Iterator[tuple[UrlEntry, bool]]:
        """The catalog's entries, those a linking page carried data to last: the page that carries to them is sent
        before them (a host's messages arrive in order), so its data of this run can reach them. Two scans then
        (each deterministic, as a continuation needs), one for a spec whose types carry nothing."""
        if not self._carries:
            yield from self._catalog_entries()
            return
        yield from ((e, s) for e, s in self._catalog_entries() if not self._carried_to(e))
        yield from ((e, s) for e, s in self._catalog_entries() if self._carried_to(e))

    @staticmethod
    def _carried_to(entry: UrlEntry) -> bool:
        return entry.result is not None and bool(entry.result.carry)

    @property
    def _carries(self) -> bool:
        return any(rule.carry for kind in (self.spec.types or {}).values() for rule in kind.follow.values())

    def tasks(self) -> Iterator[UrlTask]:
        known: list[int] = []
        for task in self._catalog_tasks():
            known.append(url_number(url_hash(task.url)))  # the entry's own key: its URL's hash
            yield task
        in_catalog = SeedSet.of_numbers(known)
        for url in self._spec_urls():
            number = url_number(url_hash(url))
            if not in_catalog.has_number(number):
                yield UrlTask(url=url, depth=0, origin="seed", lastmod=self._lastmod(number))

    def _catalog_tasks(self) -> Iterator[UrlTask]:
        """The catalog's tasks as :meth:`seed_set` stored them; scanned again from the catalog only for a fan-out
        that began before plans were stored (its continuation after an upgrade)."""
        if self._catalog is None:
            return
        stored = StoredPlan.open(self.services.objects, self.spec.name, self.run.run_id)
        if stored is not None:
            yield from stored.tasks()
            return
        logger.info("no stored seed plan: scanning the catalog", extra={"crawl": self.spec.name})
        yield from (self._task(entry, is_seed) for entry, is_seed in self._ordered_catalog())

    def _task(self, entry: UrlEntry, is_seed: bool) -> UrlTask:
        result = entry.result
        return UrlTask(
            url=entry.url,
            depth=0 if is_seed else entry.depth,
            origin="seed",
            prior=self._prior(entry),
            lastmod=self._lastmod(url_number(entry.url_hash)),
            # A page a type's rule led to is taken for the same type, with what was carried to it, and
            # told its linking page, whose data of this run it takes where that page is extracted first.
            via=result.via if result is not None else entry.via,
            carry=dict(result.carry) if result is not None and result.carry else None,
            parent=(result.parent or entry.parent) if result is not None and result.carry else None,
        )

    def _prior(self, entry: UrlEntry) -> PriorState | None:
        if entry.result is None:
            return None
        prior: Prior = entry.result.prior()
        if not self._reuse:
            # The spec changed: every page is fetched and extracted again (its digests still classify its
            # records). Without validators, so that a page with no records yet cannot answer 304 to a new spec.
            prior = Prior(records=prior.records, digests=prior.digests)
        elif prior.reused and url_number(entry.url_hash) not in self._index:
            prior = replace(prior, reused=False)
        if prior.interval is not None and self._schedule is None:
            prior = replace(prior, interval=None)  # recrawl turned off: the tasks are as they were without it
        return PriorState.of(prior)

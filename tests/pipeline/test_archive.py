"""The raw archive (``output.archive``) and ``sluice reextract``, on both adapter sets against the demo site.

The archive: one WARC file per batch, every fetched page's response once, each result's reference
a range holding exactly its record. Re-extraction: night 3's broken selector repaired from the
archive with a fixed spec and not a single request to the site (its ``/_demo/stats`` counts
them), a reused page's bytes read from the run that fetched them, the same output twice, the
next night carrying the repaired records, and the refusals.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from warcio.archiveiterator import ArchiveIterator

from sluice.domain.layout import ARCHIVE_PREFIX, index_key, manifest_key, part_key
from sluice.pipeline.reextract import ReextractRefused, ReextractWorse, reextract_run
from sluice.pipeline.visit import archive as archive_module
from sluice.pipeline.visit.archive import parse_record
from sluice.spec import parse_spec
from sluice_tools.demosite import RunningDemoSite

from .conftest import Pipeline, SpecData
from .test_page_types import typed_spec

BOOKS = 100
PAGES = BOOKS // 20


def _archived(data: dict[str, Any]) -> dict[str, Any]:
    return data | {"output": {"archive": True}}


def _fixed(data: dict[str, Any]) -> dict[str, Any]:
    """The spec with the price selector the redesigned site needs (its class is ``price-colour``)."""
    fixed: dict[str, Any] = json.loads(json.dumps(data))
    fixed["extract"]["fields"]["price"]["selector"] = "p.price-colour::text"
    return fixed


def _archive_keys(pipeline: Pipeline, crawl: str, run_id: str) -> list[str]:
    """The run's archive files, found from the references its results hold (S3 and the folder alike)."""
    keys = set()
    for entry in pipeline.services.frontier.scan(run_id):
        ref = entry.result.archive if entry.result is not None else None
        if ref is not None and ref.run_id == run_id:
            keys.add(f"{ARCHIVE_PREFIX}crawl={crawl}/run={run_id}/{ref.file}.warc.gz")
    return sorted(keys)


def _requests(site: RunningDemoSite) -> int:
    """What the demo site counted, read from its /_demo/stats as a person would."""
    answer = httpx.get(f"{site.base_url}/_demo/stats?log=0", timeout=5)
    answer.raise_for_status()
    total: int = answer.json()["total"]
    return total


def test_archive_files_are_warc_one_per_batch_with_every_fetched_page_once(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    spec = pipeline.spec(_archived(books_spec("archived", site.base_url)))
    run_id = pipeline.run(spec.name)
    results = [e.result for e in pipeline.services.frontier.scan(run_id) if e.result is not None]
    fetched = [r for r in results if r.outcome == "fetched"]
    assert len(fetched) == PAGES
    files = _archive_keys(pipeline, spec.name, run_id)
    batches = len({r.block.part for r in results if r.block is not None})
    assert len(files) == batches  # one file per batch that wrote a part
    seen: list[str] = []
    for key in files:
        data = pipeline.services.objects.get(key)
        assert data is not None
        assert data[:2] == b"\x1f\x8b"
        for record in ArchiveIterator(io.BytesIO(data)):
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Date")
            assert record.http_headers.get_statuscode() == "200"
            body = record.content_stream().read()
            assert b"product_pod" in body
            seen.append(record.rec_headers.get_header("WARC-Target-URI"))
    assert sorted(seen) == sorted(r.url for r in fetched)  # each fetched page's response once
    for result in fetched:
        ref = result.archive
        assert ref is not None
        assert ref.run_id == run_id
        key = f"{ARCHIVE_PREFIX}crawl={spec.name}/run={run_id}/{ref.file}.warc.gz"
        response = parse_record(pipeline.services.objects.get_range(key, ref.offset, ref.length))
        assert response.url == result.url
        assert response.status == 200
        served = httpx.get(result.url, timeout=5).content
        assert response.body == served  # the range is exactly this page's record, its body as received


def test_without_the_switch_nothing_is_archived_and_reextract_refuses(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    spec = pipeline.spec(books_spec("plain", site.base_url))
    run_id = pipeline.run(spec.name)
    assert all(e.result.archive is None for e in pipeline.services.frontier.scan(run_id) if e.result is not None)
    with pytest.raises(ReextractRefused, match="no archived response"):
        reextract_run(spec.name, run_id, pipeline.services)


def test_night_3s_broken_selector_is_repaired_from_the_archive_without_a_request(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = _archived(books_spec("nightly", site.base_url))
    spec = pipeline.spec(data)
    pipeline.run(spec.name)
    site.set_catalogue(books=BOOKS, version=1, changed_fraction=0.01)
    pipeline.run(spec.name)
    site.set_catalogue(books=BOOKS, version=1, changed_fraction=0.01, broken_selector=True)
    night3 = pipeline.run(spec.name)
    broken = pipeline.summary(spec.name, night3)
    assert broken["verdict"]["healthy"] is False
    assert broken["records"]["total"] < BOOKS * 0.8

    fixed = pipeline.spec(_fixed(data))
    site.reset()
    done = reextract_run(spec.name, night3, pipeline.services)  # the crawl's current spec: the fixed one
    assert _requests(site) == 0  # not a single request reached the site
    assert done.pages == PAGES
    assert done.missing_archive == 0
    summary = pipeline.summary(spec.name, night3)
    assert summary["records"]["total"] == BOOKS
    assert summary["verdict"]["healthy"] is True, summary["verdict"]
    assert summary["reextracted"]["pages"] == PAGES
    assert summary["reextracted"]["from_runs"] == [night3]
    assert summary["reextracted"]["links_followed"] is False
    assert summary["spec_digest"] == fixed.digest()
    assert len({r["_key"] for r in pipeline.records(spec.name, night3)}) == BOOKS
    assert all(r["price"] is not None for r in pipeline.records(spec.name, night3))
    run = pipeline.run_state(spec.name, night3)
    assert (run.healthy, run.records, run.spec_digest) == (True, BOOKS, fixed.digest())

    # The next night's catalog is the repaired run: its pages answer 304 and carry the repaired records.
    night4 = pipeline.run(spec.name)
    after = pipeline.summary(spec.name, night4)
    assert after["catalog_run"] == night3
    assert after["pages"]["not_modified"] == PAGES
    assert after["records"]["total"] == BOOKS
    assert after["records"]["unchanged"] == BOOKS
    assert after["verdict"]["healthy"] is True
    assert all(r["price"] is not None for r in pipeline.records(spec.name, night4))


def test_a_reused_pages_response_is_read_from_the_run_that_fetched_it(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    spec = pipeline.spec(_archived(books_spec("reused", site.base_url)))
    night1 = pipeline.run(spec.name)
    night2 = pipeline.run(spec.name)  # the same site: every page answers 304, its records reused
    reused = [e.result for e in pipeline.services.frontier.scan(night2) if e.result is not None]
    assert {r.outcome for r in reused} == {"not_modified"}
    assert {r.archive.run_id for r in reused if r.archive is not None} == {night1}
    before = pipeline.records(spec.name, night2)
    site.reset()
    done = reextract_run(spec.name, night2, pipeline.services)
    assert _requests(site) == 0
    assert done.pages == PAGES
    summary = pipeline.summary(spec.name, night2)
    assert summary["reextracted"]["from_runs"] == [night1]
    assert summary["records"]["total"] == BOOKS
    assert summary["pages"]["not_modified"] == PAGES  # how the pages ended is what it was
    after = pipeline.records(spec.name, night2)
    assert sorted(before, key=lambda r: r["_key"]) == sorted(after, key=lambda r: r["_key"])


def test_reextracting_twice_writes_the_same_output(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    spec = pipeline.spec(_archived(books_spec("twice", site.base_url)))
    run_id = pipeline.run(spec.name)
    objects = pipeline.services.objects

    def output() -> tuple[bytes | None, list[bytes | None]]:
        manifest = objects.get(manifest_key(spec.name, run_id))
        assert manifest is not None
        files = [objects.get(f["key"]) for f in json.loads(manifest)["files"]]
        return objects.get(index_key(spec.name, run_id)), files

    reextract_run(spec.name, run_id, pipeline.services)
    first = output()
    results = {e.url_hash: e.result for e in pipeline.services.frontier.scan(run_id)}
    reextract_run(spec.name, run_id, pipeline.services)
    assert output() == first
    assert {e.url_hash: e.result for e in pipeline.services.frontier.scan(run_id)} == results
    assert pipeline.summary(spec.name, run_id)["records"]["total"] == BOOKS


def test_reextract_refuses_a_run_in_flight_another_crawls_spec_and_an_unknown_run(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    data = _archived(books_spec("refused", site.base_url))
    spec = pipeline.spec(data)
    finished = pipeline.run(spec.name)
    with pytest.raises(ReextractRefused, match="has no run"):
        reextract_run(spec.name, "20200101T000000Z-000000", pipeline.services)
    other = parse_spec(data | {"name": "other"})
    with pytest.raises(ReextractRefused, match="crawl 'other'"):
        reextract_run(spec.name, finished, pipeline.services, other)
    in_flight = pipeline.start(spec.name)
    with pytest.raises(ReextractRefused, match="not finished"):
        reextract_run(spec.name, in_flight, pipeline.services)
    with pytest.raises(ReextractRefused, match="in flight"):
        reextract_run(spec.name, finished, pipeline.services)
    pipeline.drain()
    pipeline.finalize()
    assert reextract_run(spec.name, finished, pipeline.services).pages == PAGES


def test_an_output_file_the_rebuilt_manifest_no_longer_lists_is_removed(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """A spec that extracts nothing leaves no records file behind (a query of the folder reads what is there)."""
    data = _archived(books_spec("shrunk", site.base_url))
    spec = pipeline.spec(data)
    run_id = pipeline.run(spec.name)
    manifest = pipeline.manifest(spec.name, run_id)
    old = [f["key"] for f in manifest["files"]]  # one file per finalize shard that had records
    assert old
    assert all(pipeline.services.objects.size(key) is not None for key in old)
    nothing = pipeline.spec(_fixed(data))  # price-colour: the site was not redesigned, so no price, no record
    with pytest.raises(ReextractWorse, match="0 records where it has"):  # nothing replaced unless forced
        reextract_run(spec.name, run_id, pipeline.services, nothing)
    assert pipeline.manifest(spec.name, run_id)["files"] == manifest["files"]
    done = reextract_run(spec.name, run_id, pipeline.services, nothing, force=True)
    assert done.summary.records_total == 0
    assert done.summary.verdict.healthy is False
    assert pipeline.manifest(spec.name, run_id)["files"] == []
    assert all(pipeline.services.objects.size(key) is None for key in old)


def test_pages_without_an_archived_response_keep_their_records_and_are_named(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """The switch turned on for night 2: its changed pages are archived, its 304s have nothing to read."""
    data = books_spec("switched", site.base_url)
    spec = pipeline.spec(data)
    pipeline.run(spec.name)  # no archive
    assert pipeline.spec(_archived(data)).digest() == spec.digest()  # the switch fetches nothing anew
    site.set_catalogue(books=BOOKS, version=1, changed_fraction=0.03)
    night2 = pipeline.run(spec.name)
    results = [e.result for e in pipeline.services.frontier.scan(night2) if e.result is not None]
    archived = [r for r in results if r.archive is not None]
    assert {r.outcome for r in archived} == {"fetched"}
    assert 0 < len(archived) < PAGES
    done = reextract_run(spec.name, night2, pipeline.services)
    assert done.pages == len(archived)
    assert done.missing_archive == PAGES - len(archived)
    section = done.summary.to_json()["reextracted"]
    named = {m["url"] for m in section["missing_named"]}
    assert named == {r.url for r in results if r.archive is None}
    assert done.summary.to_json()["records"]["total"] == BOOKS  # nothing collected is lost
    assert done.summary.to_json()["verdict"]["healthy"] is True


def test_a_typed_run_is_re_extracted_with_each_pages_type_and_carried_fields(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData
) -> None:
    """A book page's type comes from the rule that led there and its price from its card: the archive keeps both."""
    spec = pipeline.spec(_archived(typed_spec(books_spec, site.base_url)))
    run_id = pipeline.run(spec.name)
    before = sorted((r["_type"], r["_key"], r["price"], r["rating"]) for r in pipeline.records(spec.name, run_id))
    site.reset()
    done = reextract_run(spec.name, run_id, pipeline.services)
    assert _requests(site) == 0
    assert done.pages == PAGES + BOOKS  # the listing pages and every book page
    after = sorted((r["_type"], r["_key"], r["price"], r["rating"]) for r in pipeline.records(spec.name, run_id))
    assert after == before
    assert {t for t, *_ in after} == {"listing", "book"}
    assert all(price is not None for _, _, price, _ in after)
    assert done.summary.to_json()["records"]["by_type"] == {"book": BOOKS, "listing": BOOKS}


def test_an_archive_file_that_is_not_written_fails_its_batch_before_anything_counts(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages hold references into every file of their batch: one file lost mid-batch must not be counted on."""
    monkeypatch.setattr(archive_module, "FILE_BYTES", 1)  # each page's record is a file of its own, mid-batch
    spec = pipeline.spec(_archived(books_spec("flaky", site.base_url)))
    objects = pipeline.services.objects
    real = objects.put
    lost: list[str] = []

    def put(key: str, body: bytes, content_type: str) -> None:
        if key.startswith(ARCHIVE_PREFIX) and not lost:
            lost.append(key)
            raise OSError("the store refused the write")
        real(key, body, content_type)

    monkeypatch.setattr(objects, "put", put)
    run_id = pipeline.start(spec.name)
    batch = pipeline.receive(10)
    assert pipeline.deliver(batch) == {m.id for m in batch}  # the whole batch comes back
    assert pipeline.tally(spec.name, run_id).done == 0
    pipeline.drain()
    pipeline.finalize()
    assert pipeline.summary(spec.name, run_id)["records"]["total"] == BOOKS
    lost_file = lost[0].rsplit("/", 1)[1].removesuffix(".warc.gz")
    refs = [e.result.archive for e in pipeline.services.frontier.scan(run_id) if e.result is not None]
    assert all(ref is not None and ref.file != lost_file for ref in refs)
    done = reextract_run(spec.name, run_id, pipeline.services)
    assert (done.pages, done.missing_archive) == (PAGES, 0)


def _damage(objects: Any, key: str, how: str) -> None:
    data = objects.get(key)
    assert data is not None
    if how == "truncated":
        objects.put(key, data[: len(data) // 3], "application/warc")
    elif how == "corrupt":  # every gzip member's bytes overwritten after its header
        objects.put(key, data[:10] + bytes(len(data) - 10), "application/warc")
    else:
        objects.delete(key)


@pytest.mark.parametrize("how", ["truncated", "corrupt", "deleted", "deleted after its size was read"])
def test_a_damaged_archive_leaves_its_pages_their_records_without_the_runs_working_files(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main raised FileNotFoundError about a part under work/, a file `sluice run` deletes when the run ends; now
    each page whose archive record cannot be read keeps its records (copied from the run's output), named with
    the reason, and nothing collected is lost."""
    data = _archived(books_spec("damaged", site.base_url))
    spec = pipeline.spec(data)
    run_id = pipeline.run(spec.name)
    before = sorted((r["_key"], r["price"]) for r in pipeline.records(spec.name, run_id))
    objects = pipeline.services.objects
    parts = {e.result.block.part for e in pipeline.services.frontier.scan(run_id) if e.result and e.result.block}
    assert parts
    for part in parts:
        objects.delete(part_key(spec.name, run_id, part))  # as `sluice run` leaves a finished run: no working parts
    for key in _archive_keys(pipeline, spec.name, run_id):
        _damage(objects, key, how)
    if how == "deleted after its size was read":  # the store's Missing on the ranged read, not a size of None
        monkeypatch.setattr(objects, "size", lambda key: 10**9)

    done = reextract_run(spec.name, run_id, pipeline.services)

    assert done.missing_archive >= 1  # truncated at a third: the pages whose records it still holds re-extract
    assert done.pages + done.missing_archive == PAGES
    reasons = [m["reason"] for m in done.summary.to_json()["reextracted"]["missing_named"]]
    assert len(reasons) == done.missing_archive
    assert all(r.startswith("archive record unreadable: ") for r in reasons), reasons
    assert done.summary.to_json()["reextracted"]["records_lost"] == 0
    assert sorted((r["_key"], r["price"]) for r in pipeline.records(spec.name, run_id)) == before
    assert done.summary.to_json()["records"]["total"] == BOOKS

"""Pages behind credentials, on both adapter sets: secrets named in the spec, read from Secrets Manager and SSM
on moto and from the environment locally, sent to the site, and found nowhere else: not in a log line, the
summary, a queue message, a URL's result or the records."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest

from sluice.adapters.aws.clients import client
from sluice.domain.secrets import is_ssm, local_variable, ssm_parameter
from sluice_tools.demosite import RunningDemoSite
from sluice_tools.demosite.config import DEMO_LOGIN, DEMO_TOKEN

from .conftest import Logs, Pipeline, SpecData

CRAWL = "members"
SESSION_SECRET = "sluice/test/demo-session"
PASSWORD_SECRET = "ssm:/sluice/test/staff-password"
VALUES = (DEMO_TOKEN, DEMO_LOGIN[1])
MAX_BATCHES = 50

Provide = Callable[[str, str], None]


@pytest.fixture
def provide(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Provide:
    """Store a secret where the adapter set reads it: Secrets Manager or SSM on moto, the environment locally."""

    def store(name: str, value: str) -> None:
        if pipeline.kind == "local":
            monkeypatch.setenv(local_variable(name), value)
        elif is_ssm(name):
            client("ssm").put_parameter(Name=ssm_parameter(name), Value=value, Type="SecureString")
        else:
            client("secretsmanager").create_secret(Name=name, SecretString=value)

    return store


def forget(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Take a secret away again, and start from a new container (a container keeps what it read)."""
    if pipeline.kind == "local":
        monkeypatch.delenv(local_variable(name))
    elif is_ssm(name):
        client("ssm").delete_parameter(Name=ssm_parameter(name))
    else:
        client("secretsmanager").delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    pipeline.close_container()


def members_spec(books_spec: SpecData, base_url: str) -> dict[str, Any]:
    """The demo crawl on the catalogue behind its two doors: a session cookie, and basic auth."""
    data: dict[str, Any] = books_spec(
        CRAWL,
        base_url,
        pages=0,
        urls=["/members/catalogue/page-1.html", "/staff/catalogue/page-3.html", "/members/catalogue/page-999.html"],
        max_error_rate=0.5,
    )
    data["request"] = {
        "headers": {"Accept-Language": "en-GB"},
        "cookies": {"consent": "yes", "demo_session": {"secret": SESSION_SECRET}},
        "basic_auth": {"username": DEMO_LOGIN[0], "password": {"secret": PASSWORD_SECRET}},
    }
    return data


def run_seeing_messages(pipeline: Pipeline) -> tuple[str, list[str]]:
    """A whole run; the body of every message the queue delivered on the way."""
    run_id = pipeline.start(CRAWL)
    bodies: list[str] = []
    for _ in range(MAX_BATCHES):
        messages = pipeline.receive(10)
        if not messages:
            break
        bodies += [m.body for m in messages]
        pipeline.deliver(messages)
    assert [f["run_id"] for f in pipeline.finalize()] == [run_id]
    return run_id, bodies


def everything_written(
    pipeline: Pipeline, logs: Logs, run_id: str, bodies: list[str], state: Path, *, crawl: str = CRAWL
) -> str:
    """Every place a secret must not reach, as one text: logs, summary, messages, URL results, records."""
    texts = [
        logs.stream.getvalue(),
        json.dumps(pipeline.summary(crawl, run_id)),
        *bodies,
        repr(list(pipeline.services.frontier.scan(run_id))),
        json.dumps(pipeline.records(crawl, run_id)),
    ]
    if pipeline.kind == "local":  # the whole state folder: the SQLite file, every object
        texts += [p.read_bytes().decode("latin-1") for p in state.rglob("*") if p.is_file()]
    return "\n".join(texts)


def test_pages_behind_a_cookie_and_basic_auth_are_crawled_with_secrets_found_nowhere_else(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, provide: Provide, logs: Logs, tmp_path: Path
) -> None:
    provide(SESSION_SECRET, DEMO_TOKEN)
    provide(PASSWORD_SECRET, DEMO_LOGIN[1])
    pipeline.spec(members_spec(books_spec, site.base_url))

    run_id, bodies = run_seeing_messages(pipeline)

    t = pipeline.tally(CRAWL, run_id)
    # Seeds: members page 1, staff page 3, a members page that is not there; links: members 2, staff 4.
    assert (t.fetched, t.failed) == (4, 1)
    assert t.records == 80
    pages = {r["_page"].removeprefix(site.base_url) for r in pipeline.records(CRAWL, run_id)}
    assert pages == {f"/members/catalogue/page-{n}.html" for n in (1, 2)} | {
        f"/staff/catalogue/page-{n}.html" for n in (3, 4)
    }
    assert site.stats.count("/members/catalogue/page-999.html") == 1  # 404 behind the door: failed, with its reason
    assert pipeline.summary(CRAWL, run_id)["failures"]
    written = everything_written(pipeline, logs, run_id, bodies, tmp_path)
    assert "page failed" in written  # the failure's own log line is in what was searched
    for value in VALUES:
        assert value not in written


def test_without_the_secrets_the_site_refuses_the_crawler(
    pipeline: Pipeline, site: RunningDemoSite, books_spec: SpecData, provide: Provide
) -> None:
    """What the secrets are for: the same crawl with wrong values gets 403 and 401, and no records."""
    provide(SESSION_SECRET, "wrong-session")
    provide(PASSWORD_SECRET, "wrong-password")
    pipeline.spec(members_spec(books_spec, site.base_url))
    run_id, _ = run_seeing_messages(pipeline)
    t = pipeline.tally(CRAWL, run_id)
    assert (t.fetched, t.failed, t.records) == (0, 3, 0)
    reasons = json.dumps(pipeline.summary(CRAWL, run_id)["failures"])
    assert "http 403" in reasons
    assert "http 401" in reasons


def test_a_secret_that_went_missing_fails_the_pages_naming_it_and_loses_nothing_collected(
    pipeline: Pipeline,
    site: RunningDemoSite,
    books_spec: SpecData,
    provide: Provide,
    logs: Logs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provide(SESSION_SECRET, DEMO_TOKEN)
    provide(PASSWORD_SECRET, DEMO_LOGIN[1])
    pipeline.spec(members_spec(books_spec, site.base_url))
    first, _ = run_seeing_messages(pipeline)
    collected = pipeline.records(CRAWL, first)
    forget(pipeline, monkeypatch, PASSWORD_SECRET)
    fetched_before = site.stats.total

    second, bodies = run_seeing_messages(pipeline)

    t = pipeline.tally(CRAWL, second)
    assert t.drained  # nothing left waiting: the run ended with its verdict
    assert (t.failed, t.records) == (t.done, 0)  # every page failed (its seeds, and the pages the last run knew)
    assert t.done == 5
    assert site.stats.total == fetched_before  # no request without the credentials the spec asks for
    assert pipeline.dead_letters() == []  # failed for good, at once: retrying cannot make a secret appear
    summary = pipeline.summary(CRAWL, second)
    assert summary["verdict"]["healthy"] is False
    assert f"secret '{PASSWORD_SECRET}' unavailable" in json.dumps(summary["failures"])
    (line, *_) = logs.named("secret unavailable")
    assert (line["secret"], line["retryable"]) == (PASSWORD_SECRET, False)
    assert pipeline.records(CRAWL, first) == collected  # the last good run's output is as it was
    written = everything_written(pipeline, logs, second, bodies, tmp_path)
    for value in VALUES:
        assert value not in written


TOKEN_SECRET = "sluice/test/origin-token"
TOKEN_VALUE = "test-origin-token-not-a-secret"


class _Recording(BaseHTTPRequestHandler):
    """A loopback site that answers every path and remembers which requests carried the token."""

    pages: ClassVar[dict[str, tuple[int, str, str]]] = {}
    """path -> (status, location or "", body)."""
    seen: list[tuple[int, str, bool]]

    def do_GET(self) -> None:
        port = cast(tuple[str, int], self.server.server_address)[1]
        self.seen.append((int(port), self.path, TOKEN_VALUE in str(self.headers)))
        status, location, body = self.pages.get(self.path, (404, "", "no such page"))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html")
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def two_ports() -> Iterator[tuple[str, str, list[tuple[int, str, bool]]]]:
    """Two loopback servers on one host, another port each: ``(base A, base B, requests seen by both)``."""
    seen: list[tuple[int, str, bool]] = []
    handler = cast(type[_Recording], type("Handler", (_Recording,), {"seen": seen}))
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), handler) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    a, b = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
    robots = (200, "", "User-agent: *\nAllow: /\n")
    handler.pages = {
        "/robots.txt": robots,
        "/start": (200, "", f'<h1>start</h1><a href="{b}/page">other port</a> <a href="{a}/hop">hop</a>'),
        "/hop": (302, f"{b}/landing", ""),
        "/page": (200, "", "<h1>page</h1>"),
        "/landing": (200, "", "<h1>landing</h1>"),
    }
    try:
        yield a, b, seen
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(5)


def token_spec(a: str, origins: list[str]) -> dict[str, Any]:
    return {
        "name": CRAWL,
        "seeds": [f"{a}/start"],
        "follow": {"selectors": ["a"], "max_depth": 1, "allowed_domains": ["127.0.0.1"]},
        "extract": {
            "fields": {"title": {"selector": "h1::text", "required": True}, "url": "::page_url"},
            "key": ["url"],
        },
        "politeness": {"concurrency": 4, "timeout_seconds": 5, "retry": {"times": 0}},
        "request": {"headers": {"X-Demo-Token": {"secret": TOKEN_SECRET}}, "origins": origins},
    }


@pytest.mark.parametrize("listed", [False, True], ids=["seeds-origin-only", "other-port-listed"])
def test_credentials_go_only_to_the_origins_the_spec_names_not_to_another_port_of_the_host(
    pipeline: Pipeline, provide: Provide, listed: bool
) -> None:
    """A link to another port, a redirect to it and that port's robots.txt: none carries the token unless the spec
    lists that origin; the seed's own origin (its pages, its robots.txt) gets it."""
    provide(TOKEN_SECRET, TOKEN_VALUE)
    with two_ports() as (a, b, seen):
        pipeline.spec(token_spec(a, [b] if listed else []))
        run_id = pipeline.run(CRAWL)
        requests = list(seen)
    a_port, b_port = int(a.rsplit(":", 1)[1]), int(b.rsplit(":", 1)[1])
    by_where = {(port, path): carried for port, path, carried in requests}
    assert [by_where[(a_port, path)] for path in ("/robots.txt", "/start", "/hop")] == [True, True, True]
    other = {path: by_where[(b_port, path)] for path in ("/robots.txt", "/page", "/landing")}
    assert other == dict.fromkeys(("/robots.txt", "/page", "/landing"), listed)
    assert pipeline.tally(CRAWL, run_id).fetched == 3  # start, page, and the hop's landing

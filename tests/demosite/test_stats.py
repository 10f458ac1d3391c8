"""Observability: in-flight maxima per Host, per-path counts, the header log, /_demo/ JSON."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import httpx

from sluice_tools.demosite import RunningDemoSite


def _wait_for(condition: Callable[[], bool]) -> bool:
    """Poll `condition` up to 500 times (at most ~5 s); no timing is asserted."""
    done = threading.Event()
    for _ in range(500):
        if condition():
            return True
        done.wait(0.01)
    return condition()


def _hold(port: int, host: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(f"GET /catalogue/page-1.html HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


def test_max_concurrency_per_host(site: RunningDemoSite) -> None:
    site.set_config(latency_ms=60_000)
    held = [_hold(site.port, "a.test:80") for _ in range(3)] + [_hold(site.port, "B.test") for _ in range(2)]
    try:
        assert _wait_for(lambda: site.stats.in_flight == 5)
        snapshot = site.stats.snapshot()
        assert snapshot["max_in_flight"] == 5
        assert snapshot["max_in_flight_by_host"] == {"a.test": 3, "b.test": 2}
        assert snapshot["in_flight_by_host"] == {"a.test": 3, "b.test": 2}
        with httpx.Client(base_url=site.base_url, trust_env=False) as client:
            remote = client.get("/_demo/stats", params={"log": "0"}).json()
        assert remote["max_in_flight_by_host"] == {"a.test": 3, "b.test": 2}
        assert "log" not in remote
    finally:
        for sock in held:
            sock.close()
    assert _wait_for(lambda: site.stats.in_flight == 0)
    assert site.stats.max_in_flight == 5
    assert [r.status for r in site.stats.records()] == [0] * 5


def test_counts_and_header_log(site: RunningDemoSite, client: httpx.Client) -> None:
    headers = {
        "User-Agent": "sluice-test/1",
        "If-None-Match": '"abc"',
        "If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT",
    }
    client.get("/catalogue/page-2.html?x=1", headers=headers)
    client.get("/catalogue/page-2.html")
    client.get("/robots.txt")
    assert site.stats.count("/catalogue/page-2.html") == 2
    assert site.stats.count("/robots.txt") == 1
    record = site.stats.records("/catalogue/page-2.html")[0]
    assert record.user_agent == "sluice-test/1"
    assert record.if_none_match == '"abc"'
    assert record.if_modified_since == "Mon, 01 Jan 2024 00:00:00 GMT"
    assert record.target == "/catalogue/page-2.html?x=1"
    assert record.host == "127.0.0.1"
    assert record.status == 200  # If-None-Match did not match, so If-Modified-Since is ignored
    log = client.get("/_demo/stats").json()["log"]
    assert [entry["path"] for entry in log] == ["/catalogue/page-2.html", "/catalogue/page-2.html", "/robots.txt"]
    assert site.stats.max_in_flight_by_host == {"127.0.0.1": 1}


def test_demo_endpoints_reset_and_are_not_counted(site: RunningDemoSite, client: httpx.Client) -> None:
    client.get("/robots.txt")
    assert client.post("/_demo/reset").json() == {"reset": True}
    assert client.get("/_demo/stats").json()["total"] == 0
    client.get("/robots.txt")
    client.get("/_demo/reset")
    assert site.stats.total == 0
    assert site.stats.records() == []
    assert client.get("/_demo/nope").status_code == 404


def test_bytes_on_the_wire_and_connections_are_counted_both_ways(site: RunningDemoSite) -> None:
    """What a NAT gateway in front of a crawler would process (`make cost`'s fixed egress figures)."""
    request = b"GET /catalogue/page-1.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", site.port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        for _ in range(10_000):  # until the site closes the connection
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")
    assert _wait_for(lambda: site.stats.bytes_sent == len(answer))
    assert (site.stats.bytes_received, site.stats.connections) == (len(request), 1)
    site.stats.reset()
    assert (site.stats.bytes_received, site.stats.bytes_sent, site.stats.connections) == (0, 0, 0)


def test_the_first_request_and_the_last_answer_bound_the_crawl_as_the_site_saw_it(
    site: RunningDemoSite, client: httpx.Client
) -> None:
    """``bench.many_hosts`` reads the crawl's own seconds from these, beside the whole command's."""
    assert (site.stats.first_begun, site.stats.last_ended) == (None, None)
    client.get("/catalogue/page-1.html")
    assert _wait_for(lambda: site.stats.in_flight == 0)  # counted out just after its answer is handed over
    first, after_one = site.stats.first_begun, site.stats.last_ended
    client.get("/catalogue/page-2.html")
    assert _wait_for(lambda: site.stats.in_flight == 0)
    snapshot = site.stats.snapshot(with_log=False)
    assert first is not None
    assert after_one is not None
    assert snapshot["first_begun"] == first  # the first request's, not the latest's
    assert first <= after_one <= snapshot["last_ended"]
    site.stats.reset()
    assert (site.stats.first_begun, site.stats.last_ended) == (None, None)

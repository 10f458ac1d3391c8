"""AddressGuard: address classes, schemes, literals without DNS, resolution, trusted origins."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

import pytest

from sluice.fetch.errors import PermanentFetchError, RetryableFetchError, UnsafeAddressError
from sluice.fetch.safety import AddressGuard, Resolver, address_refusal
from sluice.fetch.transport import GuardedResolver

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 - a value under test
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not globally routable"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback (IPv4-mapped 127.0.0.1)"),
        ("::ffff:169.254.169.254", "link-local (IPv4-mapped 169.254.169.254)"),
        ("::ffff:10.0.0.1", "private (IPv4-mapped 10.0.0.1)"),
        ("2002:7f00:1::", "loopback (6to4 127.0.0.1)"),
        ("2002:a9fe:a9fe::1", "link-local (6to4 169.254.169.254)"),
        ("64:ff9b::a9fe:a9fe", "link-local (NAT64 169.254.169.254)"),
    ],
)
def test_refused_address_classes(address: str, kind: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_refusal(ip) == f"address {ip} is {kind}"


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:2800:220:1::1", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1", "2002:7f00:1::"])
def test_loopback_only_when_allowed(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), allow_loopback=True) is None


@pytest.mark.parametrize("address", ["10.0.0.1", "169.254.169.254", "fe80::1", "0.0.0.0"])  # noqa: S104
def test_allow_loopback_allows_nothing_else(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), allow_loopback=True) is not None


async def no_dns(host: str, port: int) -> Iterable[str]:
    raise AssertionError(f"DNS asked for {host}")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/", "scheme ftp is not http(s)"),
        ("file:///etc/passwd", "scheme file is not http(s)"),
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is link-local"),
        ("http://[::ffff:169.254.169.254]/", "address ::ffff:a9fe:a9fe is link-local (IPv4-mapped 169.254.169.254)"),
        ("http://[::1]:8080/", "address ::1 is loopback"),
        ("https://10.0.0.1/", "address 10.0.0.1 is private"),
    ],
)
async def test_literals_and_schemes_are_refused_without_dns(url: str, reason: str) -> None:
    assert await AddressGuard(resolver=no_dns).check(url) == reason


async def test_any_private_address_among_many_refuses_the_host(fake_dns: Resolver) -> None:
    guard = AddressGuard(resolver=fake_dns)
    assert await guard.check("http://example.com/") is None
    assert await guard.check("http://evil.example/") == "evil.example resolves to 10.0.0.7: address 10.0.0.7 is private"
    assert "IPv4-mapped 127.0.0.1" in (await guard.check("http://mapped.example/") or "")


async def test_resolution_is_cached_briefly() -> None:
    calls: list[str] = []

    async def counting(host: str, port: int) -> Iterable[str]:
        calls.append(host)
        return ["93.184.216.34"]

    guard = AddressGuard(resolver=counting)
    for _ in range(3):
        assert await guard.check("http://example.com/a") is None
    assert calls == ["example.com"]


async def test_dns_failures_are_errors_not_refusals(fake_dns: Resolver) -> None:
    async def flaky(host: str, port: int) -> Iterable[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with pytest.raises(RetryableFetchError, match=r"cannot resolve host example\.com"):
        await AddressGuard(resolver=flaky).check("http://example.com/")
    with pytest.raises(PermanentFetchError, match=r"host nowhere\.example not found"):
        await AddressGuard(resolver=fake_dns).check("http://nowhere.example/")


async def test_trusted_origin_is_exact_host_and_port(fake_dns: Resolver) -> None:
    guard = AddressGuard(trusted=["127.0.0.1:8123"], resolver=fake_dns)
    assert await guard.check("http://127.0.0.1:8123/page") is None
    assert await guard.check("http://127.0.0.1:8124/page") == "address 127.0.0.1 is loopback"
    assert await guard.check("http://127.0.0.1/") == "address 127.0.0.1 is loopback"


@pytest.mark.parametrize(
    ("guard", "allowed"),
    [
        (AddressGuard(), False),
        (AddressGuard(allow_loopback=True), True),
        (AddressGuard(trusted=["localhost:8080"]), True),
        (AddressGuard(trusted=["localhost:8081"]), False),
    ],
)
async def test_guarded_resolver_rechecks_at_connect_time(guard: AddressGuard, allowed: bool) -> None:
    resolver = GuardedResolver(guard)
    try:
        if allowed:
            assert {r["host"] for r in await resolver.resolve("localhost", 8080)} >= {"127.0.0.1"}
        else:
            with pytest.raises(UnsafeAddressError, match=r"at connect time: address 127\.0\.0\.1 is loopback"):
                await resolver.resolve("localhost", 8080)
    finally:
        await resolver.close()

"""What a crawl's requests carry beyond the fetcher's own head, resolved: headers, credentials, the proxy.

Built once per container from the spec's ``request`` section and its secrets
(:func:`resolve_request`). Literal headers go with every request; credentials (headers whose
value is a secret, the Cookie header, basic auth's Authorization) go only to the origins the spec
names (scheme, host and port: :meth:`~sluice.spec.CrawlSpec.credential_origins`), as browsers keep
them to an origin: another port, plain http beside https or a subdomain gets none unless the spec
names it, and a redirect chain that leaves those origins, or steps down from https to http, carries
none from there on. Secret values
stay in :class:`~sluice.domain.secrets.Secret` until the request head is built, so every
repr shows a mask.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from sluice.domain.secrets import Secret, SecretUnavailable
from sluice.spec.request import (
    Origin,
    RequestSpec,
    SecretRef,
    cookie_value_problem,
    header_value_problem,
    origin_of,
    proxy_problem,
)

if TYPE_CHECKING:
    import httpx

    from .proxies import ProxyPool

ReadSecret = Callable[[str], Secret]
"""The value of a named secret; raises :class:`~sluice.domain.secrets.SecretUnavailable`."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """The proxy every request goes through: its address without credentials, and those apart."""

    url: str
    username: str | None = None
    password: Secret | None = None


@dataclass(frozen=True, slots=True)
class RequestCredentials:
    """The extra head of a crawl's requests; ``private`` only ever reaches the ``origins``."""

    origins: frozenset[Origin]
    public: tuple[tuple[str, str], ...] = ()
    """Literal headers (none of them a credential: the spec refuses those): sent with every request."""
    private: tuple[tuple[str, Secret], ...] = ()
    """Headers from secrets, the Cookie header, basic auth: sent to the named origins only."""
    proxy: Proxy | None = None
    proxies: ProxyPool | None = None
    """``request.proxies``, resolved (:mod:`sluice.fetch.proxies`): a pool instead of one proxy."""
    private_names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "private_names", frozenset(name.lower() for name, _ in self.private))

    def may_carry(self, target: httpx.URL, previous: httpx.URL | None) -> bool:
        """Whether a request to ``target`` (a redirect from ``previous``, if any) may carry the credentials."""
        if previous is not None and previous.scheme == "https" and target.scheme != "https":
            return False
        return origin_of(str(target)) in self.origins

    def headers(self, *, with_credentials: bool) -> dict[str, str]:
        """The head to add to a request: the literal headers, and the credentials if they may go."""
        head = dict(self.public)
        if with_credentials:
            head.update((name, value.reveal()) for name, value in self.private)
        return head


def resolve_request(section: RequestSpec, origins: frozenset[Origin], read: ReadSecret) -> RequestCredentials:
    """The section with every secret read through ``read`` and checked for the place it goes; its credentials
    kept to ``origins`` (the spec's :meth:`~sluice.spec.CrawlSpec.credential_origins`).

    Raises :class:`SecretUnavailable` naming the reference (never the value) when a secret cannot
    be read or its value cannot go where the spec puts it (a line break in a header, a cookie
    with a space, a proxy that is no URL)."""

    def value(item: str | SecretRef) -> str:
        return item if isinstance(item, str) else read(item.secret).reveal()

    def fits(item: str | SecretRef, problem: str | None) -> None:
        if problem is not None and isinstance(item, SecretRef):
            raise SecretUnavailable(item.secret, f"its value {problem}")

    public: list[tuple[str, str]] = []
    private: list[tuple[str, Secret]] = []
    for name, item in section.headers.items():
        text = value(item)
        fits(item, header_value_problem(text))
        if isinstance(item, SecretRef) or name.lower() == "authorization":
            private.append((name, Secret(text)))
        else:
            public.append((name, text))
    if section.cookies:
        pairs = []
        for name, item in section.cookies.items():
            text = value(item)
            fits(item, cookie_value_problem(text))
            pairs.append(f"{name}={text}")
        private.append(("Cookie", Secret("; ".join(pairs))))
    if section.basic_auth is not None:
        auth = section.basic_auth
        user = value(auth.username)
        fits(auth.username, "holds ':' (basic auth joins name:password)" if ":" in user else header_value_problem(user))
        password = value(auth.password)
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        private.append(("Authorization", Secret(f"Basic {token}")))
    proxy = _proxy(section.proxy, value) if section.proxy is not None else None
    return RequestCredentials(origins, tuple(public), tuple(private), proxy)


def _proxy(item: str | SecretRef, value: Callable[[str | SecretRef], str]) -> Proxy:
    text = value(item)
    problem = proxy_problem(text)
    if problem is not None:
        if isinstance(item, SecretRef):
            raise SecretUnavailable(item.secret, f"its value {problem}")
        raise ValueError(f"the proxy URL {problem}")  # a literal the spec checked already
    parts = urlsplit(text)
    address = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], "", "", ""))
    if parts.username is None:
        return Proxy(address)
    return Proxy(address, unquote(parts.username), Secret(unquote(parts.password or "")))

"""The ``request`` section: what a crawl's requests carry beyond the fetcher's own head.

Extra headers, cookies, HTTP basic auth and a proxy. Any value may be a literal (a header
that is no secret, ``Accept-Language: en``) or a reference, ``{secret: NAME}``: a Secrets
Manager secret, or ``ssm:/path`` for an SSM SecureString, deployed; an environment variable
locally (:func:`sluice.domain.secrets.local_variable`). A literal that looks like a credential
(any Authorization value, a password, a session cookie, a bearer token) is refused, saying to
use a reference: a spec is committed, deployed and copied, and a secret has no place in it.

The section stands alone (it knows nothing of the crawl around it), so it can later hang
under a page type as well as under the crawl.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from sluice.domain.secrets import local_variable, name_problem
from sluice.spec.proxies import ProxyPoolSpec, ProxyRotation

MAX_HEADERS = 32
MAX_COOKIES = 32
MAX_ORIGINS = 32
"""Origins ``request.origins`` names at most, besides the seeds' own."""
MAX_LITERAL = 4096
"""A literal header or cookie value at most, in characters."""

_T = TypeVar("_T")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
"""An HTTP header (or cookie) name: RFC 9110's token characters."""
_COOKIE_VALUE = re.compile(r'"?[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"?')
"""RFC 6265's cookie-octets (no space, comma, semicolon, backslash or quote inside)."""
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
"""What a header value may hold: visible characters, spaces and tabs (no CR, LF or NUL)."""

_RESERVED = {
    "host": "the fetcher sets it from the URL",
    "content-length": "the fetcher sends GETs without a body",
    "transfer-encoding": "the fetcher sends GETs without a body",
    "connection": "the fetcher manages its connections",
    "keep-alive": "the fetcher manages its connections",
    "proxy-connection": "the fetcher manages its connections",
    "te": "the fetcher manages its connections",
    "trailer": "the fetcher manages its connections",
    "upgrade": "the fetcher speaks HTTP/1.1",
    "user-agent": "set politeness.user_agent",
    "accept-encoding": "the fetcher asks for what it decodes itself (gzip, deflate), under its body cap",
    "if-none-match": "the fetcher's conditional requests set it",
    "if-modified-since": "the fetcher's conditional requests set it",
    "if-match": "a crawl fetches whole pages",
    "if-unmodified-since": "a crawl fetches whole pages",
    "if-range": "a crawl fetches whole pages",
    "range": "a crawl fetches whole pages",
    "cookie": "give cookies in request.cookies",
    "proxy-authorization": "give the proxy's credentials in request.proxy, by reference",
}
_STRONG = re.compile(r"auth|token|secret|passw|session|credential|apikey|api_key|csrf|xsrf|jwt|signature|bearer", re.I)
_WEAK = frozenset({"key", "sid", "pass", "pwd", "pin", "login", "sig", "otp"})
_SCHEME = re.compile(r"(basic|bearer|digest|token|negotiate|ntlm|hoba|mutual|apikey|aws4-hmac-sha256)\s+\S", re.I)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}")
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_.~-]{24,}")


Origin = tuple[str, str, int]
"""Where credentials may go: ``(scheme, host, port)``, as browsers scope them (RFC 6454)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> Origin | None:
    """The origin of an http(s) URL: scheme and host lower-cased, the host IDNA-encoded without a trailing dot, the
    port given or the scheme's default; None for anything else (no host, another scheme, a bad port)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def show_origin(origin: Origin) -> str:
    """``scheme://host:port``, as the docs and error messages write an origin."""
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def origin_problem(text: str) -> str | None:
    """Why ``text`` is not an origin a spec can name (``scheme://host[:port]``, nothing more), or None."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "is not a URL"
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        return "is not an http:// or https:// origin"
    if "@" in parts.netloc:
        return "carries a user name or password: an origin is scheme://host[:port]"
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.endswith(("?", "#")):
        return "is an origin only: scheme://host[:port], no path, query or fragment"
    if origin_of(text) is None:
        return "has no host"
    return None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class SecretRef(_Strict):
    """A value named, not written: ``{secret: NAME}``."""

    secret: str

    @field_validator("secret")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def _literal_or_reference(value: Any) -> Any:
    """A string (numbers are taken as their text) or ``{secret: NAME}``, with errors that say which."""
    if isinstance(value, str | SecretRef):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):
        if set(value) != {"secret"}:
            keys = ", ".join(sorted(map(str, value))) or "nothing"
            raise ValueError(f"a reference is {{secret: NAME}} (one key), not a mapping of {keys}")
        name = value["secret"]
        if not isinstance(name, str):
            raise ValueError("a reference names its secret with a string: {secret: NAME}")
        problem = name_problem(name)
        if problem:
            raise ValueError(problem)
        return SecretRef(secret=name)
    raise ValueError("a value is a string or a reference {secret: NAME}")


def _reference_only(what: str) -> Any:
    def check(value: Any) -> Any:
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            raise ValueError(_use_a_reference(f"{what} is a credential"))
        return _literal_or_reference(value)

    return BeforeValidator(check)


Value = Annotated[str | SecretRef, BeforeValidator(_literal_or_reference)]
"""A literal, or a reference to a secret."""


def _use_a_reference(why: str) -> str:
    example = local_variable("NAME")
    return (
        f"{why}, and a spec is no place for one (it is committed, deployed and copied): "
        f"name it by reference, {{secret: NAME}} (a Secrets Manager secret, or ssm:/path for an SSM SecureString; "
        f"locally the environment variable {example})"
    )


def _sensitive_name(name: str) -> bool:
    """A header or cookie name that carries credentials by its look (Authorization, X-Api-Key, sessionid)."""
    return bool(_STRONG.search(name)) or any(word in _WEAK for word in re.split(r"[-_.]", name.lower()))


def credential_like(value: str) -> bool:
    """A value that looks like a credential whatever its name: an auth scheme and token, a JWT, a long opaque token."""
    if _SCHEME.match(value) or _JWT.search(value):
        return True
    opaque = _OPAQUE.fullmatch(value.strip('"'))
    return opaque is not None and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a header's value (literal or resolved), or None."""
    if not _FIELD_VALUE.fullmatch(value):
        return "holds a line break or a control character"
    if value != value.strip(" \t"):
        return "starts or ends with whitespace"
    return None


def cookie_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a cookie's value (RFC 6265: no space, comma, semicolon, backslash), or None."""
    return None if _COOKIE_VALUE.fullmatch(value) else "is not a cookie value (no spaces, commas, semicolons, quotes)"


def proxy_problem(url: str) -> str | None:
    """Why ``url`` cannot be the proxy, or None: ``http(s)://host:port`` (credentials, if any, are checked apart)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "is a proxy's address only: http(s)://host:port, no path"
    return None


class BasicAuth(_Strict):
    """HTTP basic auth: sent as ``Authorization: Basic ...`` to the spec's origins only."""

    username: Value
    password: Annotated[SecretRef, _reference_only("a password")]

    @field_validator("username")
    @classmethod
    def _username(cls, value: str | SecretRef) -> str | SecretRef:
        if isinstance(value, str) and (":" in value or not value or header_value_problem(value)):
            raise ValueError("a user name is one line, not empty, without ':' (basic auth joins name:password)")
        return value


class RequestSpec(_Strict):
    """What every request of the crawl carries: headers, cookies, basic auth, and the proxy they go through."""

    headers: dict[str, Value] = Field(default_factory=dict, max_length=MAX_HEADERS)
    cookies: dict[str, Value] = Field(default_factory=dict, max_length=MAX_COOKIES)
    basic_auth: BasicAuth | None = None
    proxy: Value | None = None
    """Every request goes through it: ``http(s)://host:port``, or a reference whose value is such a URL
    (and may carry the proxy's user name and password)."""
    proxies: ProxyPoolSpec = Field(default_factory=list)
    """A pool instead of one proxy (:mod:`sluice.spec.proxies`): tiers, rotation, health."""
    proxy_rotation: ProxyRotation = "sticky"
    origins: list[str] = Field(default_factory=list, max_length=MAX_ORIGINS)
    """Origins (``scheme://host[:port]``) the credentials go to besides the seeds' and listed sitemaps' own."""

    @field_validator("origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for i, text in enumerate(origins):
            problem = origin_problem(text)
            if problem:
                raise ValueError(f"entry {i + 1}: {text!r} {problem}")
        return origins

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str | SecretRef]) -> dict[str, str | SecretRef]:
        seen: set[str] = set()
        problems = []
        for name, value in headers.items():
            lower = name.lower()
            if lower in seen:
                problems.append(f"{name}: given twice (header names are case-insensitive)")
            seen.add(lower)
            problems.extend(_header_problems(name, value))
        return _every(problems, headers)

    @field_validator("cookies")
    @classmethod
    def _cookies(cls, cookies: dict[str, str | SecretRef]) -> dict[str, str | SecretRef]:
        return _every([p for name, value in cookies.items() for p in _cookie_problems(name, value)], cookies)

    @field_validator("proxy")
    @classmethod
    def _proxy(cls, value: str | SecretRef | None) -> str | SecretRef | None:
        if isinstance(value, str):
            problem = proxy_problem(value)
            if problem:
                raise ValueError(f"the proxy URL {problem}")
            if "@" in urlsplit(value).netloc:
                raise ValueError(_use_a_reference("the proxy URL carries a user name or password"))
        return value

    @model_validator(mode="after")
    def _one_authorization(self) -> RequestSpec:
        if self.origins and not self.has_credentials:
            raise ValueError(
                "origins says where credentials go, and the section has none "
                "(a header from a secret, cookies, basic_auth): remove it"
            )
        if self.proxy is not None and self.proxies:
            raise ValueError("give proxy or proxies, not both (one proxy is a pool of one)")
        if self.basic_auth is not None and any(n.lower() == "authorization" for n in self.headers):
            raise ValueError("give basic_auth or an Authorization header, not both (both are the Authorization header)")
        variables: dict[str, str] = {}
        for name in self.secret_names():
            other = variables.setdefault(local_variable(name), name)
            if other != name:
                raise ValueError(
                    f"secrets {other!r} and {name!r} are both {local_variable(name)} locally: rename one of them"
                )
        return self

    @property
    def has_credentials(self) -> bool:
        """True when requests carry credentials: a header from a secret, cookies, basic auth."""
        return bool(self.cookies or self.basic_auth or any(isinstance(v, SecretRef) for v in self.headers.values()))

    @property
    def configured(self) -> bool:
        """True when requests carry anything beyond the fetcher's own head."""
        return bool(self.headers or self.cookies or self.basic_auth or self.proxy or self.proxies)

    def secret_names(self) -> list[str]:
        """Every secret the section names, each once, in the order written (the fetcher's grant is on these)."""
        values: list[str | SecretRef | None] = [*self.headers.values(), *self.cookies.values(), self.proxy]
        if self.basic_auth is not None:
            values += [self.basic_auth.username, self.basic_auth.password]
        values += [SecretRef(secret=p.secret) for p in self.proxies]
        return list(dict.fromkeys(v.secret for v in values if isinstance(v, SecretRef)))


def _every(problems: list[str], value: _T) -> _T:
    """``value`` if there are no problems, else one ValueError naming each (a line each: the spec loader
    reports every line under the field's path, so three bad headers are three errors, not the first)."""
    if problems:
        raise ValueError("\n".join(problems))
    return value


def _header_problems(name: str, value: str | SecretRef) -> list[str]:
    """What is wrong with one header (at most one thing: the first rule it breaks)."""
    if not _TOKEN.fullmatch(name):
        return [f"{name!r} is not a header name (letters, digits and !#$%&'*+.^_`|~-)"]
    lower = name.lower()
    if lower in _RESERVED:
        return [f"{name}: not a header a spec sets: {_RESERVED[lower]}"]
    if isinstance(value, SecretRef):
        return []
    problem = header_value_problem(value) or (
        f"is longer than {MAX_LITERAL} characters" if len(value) > MAX_LITERAL else None
    )
    if problem:
        return [f"{name}: the value {problem}"]
    if lower == "authorization" or _sensitive_name(name) or credential_like(value):
        return [f"{name}: " + _use_a_reference("a literal value here looks like a credential")]
    return []


def _cookie_problems(name: str, value: str | SecretRef) -> list[str]:
    """What is wrong with one cookie (at most one thing: the first rule it breaks)."""
    if not _TOKEN.fullmatch(name):
        return [f"{name!r} is not a cookie name (letters, digits and !#$%&'*+.^_`|~-)"]
    if isinstance(value, SecretRef):
        return []
    if len(value) > MAX_LITERAL:
        return [f"{name}: the value is longer than {MAX_LITERAL} characters"]
    problem = cookie_value_problem(value)
    if problem:
        return [f"{name}: the value {problem}"]
    if _sensitive_name(name) or credential_like(value):
        return [f"{name}: " + _use_a_reference("a literal value here looks like a session or token")]
    return []

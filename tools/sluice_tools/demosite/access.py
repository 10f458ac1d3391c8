"""The catalogue behind credentials: ``/members/`` wants a token, ``/staff/`` HTTP basic auth.

``/members/catalogue/page-1.html`` is ``/catalogue/page-1.html`` for a client that sends the
token in the ``X-Demo-Token`` header or the ``demo_session`` cookie, and 403 for any other;
``/staff/...`` is the same for a client with the staff login, and 401 with a Basic challenge
for any other. The sitemaps are behind the doors too (``/members/sitemap-index.xml`` lists the
``/members/`` pages). The values are the config's (``DemoSiteConfig``), obvious test values: what a
crawl's secrets hold in the tests and the demo.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from .config import DemoSiteConfig
from .faults import error_page
from .http1 import Request, Response

MEMBERS = "/members"
STAFF = "/staff"
TOKEN_HEADER = "x-demo-token"  # noqa: S105 - a header name
SESSION_COOKIE = "demo_session"
REALM = "demo staff"


def split(path: str) -> tuple[str, str]:
    """(the protected prefix, the path behind it), or ``("", path)`` for an open path."""
    for prefix in (MEMBERS, STAFF):
        if path == prefix or path.startswith(prefix + "/"):
            return prefix, path[len(prefix) :] or "/"
    return "", path


def refusal(prefix: str, request: Request, config: DemoSiteConfig) -> Response | None:
    """None when ``request`` may see what ``prefix`` guards, else the answer a site gives without it."""
    if prefix == MEMBERS:
        sent = request.headers.get(TOKEN_HEADER) or _cookie(request, SESSION_COOKIE)
        if sent is not None and hmac.compare_digest(sent.encode(), config.access_token.encode()):
            return None
        return error_page(403, f"Members only: send the {TOKEN_HEADER} header or the {SESSION_COOKIE} cookie.")
    login = _basic_login(request)
    user, password = config.staff_login
    if login is not None and login[0] == user and hmac.compare_digest(login[1].encode(), password.encode()):
        return None
    challenge = [("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"')]
    return error_page(401, "Staff only: log in.", challenge)


def _cookie(request: Request, name: str) -> str | None:
    for pair in request.headers.get("cookie", "").split(";"):
        key, _, value = pair.strip().partition("=")
        if key == name:
            return value
    return None


def _basic_login(request: Request) -> tuple[str, str] | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None

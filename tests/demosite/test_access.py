"""The catalogue behind credentials: a token by header or cookie for /members/, basic auth for /staff/."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sluice_tools.demosite.config import DEMO_LOGIN, DEMO_TOKEN

LISTING = "/catalogue/page-1.html"


def test_members_pages_want_the_token_by_header_or_cookie(client: httpx.Client) -> None:
    refused = client.get(f"/members{LISTING}")
    assert refused.status_code == 403
    assert "X-Demo-Token".lower() in refused.text.lower()
    assert client.get(f"/members{LISTING}", headers={"X-Demo-Token": "wrong"}).status_code == 403
    by_header = client.get(f"/members{LISTING}", headers={"X-Demo-Token": DEMO_TOKEN})
    by_cookie = client.get(f"/members{LISTING}", headers={"Cookie": f"consent=yes; demo_session={DEMO_TOKEN}"})
    assert by_header.status_code == by_cookie.status_code == 200
    assert by_header.content == client.get(LISTING).content  # the same catalogue, behind the door
    assert 'href="page-2.html"' in by_header.text  # its links stay behind it


def test_staff_pages_want_basic_auth_and_say_so(client: httpx.Client) -> None:
    refused = client.get(f"/staff{LISTING}")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Basic realm="demo staff", charset="UTF-8"'
    assert client.get(f"/staff{LISTING}", auth=(DEMO_LOGIN[0], "wrong")).status_code == 401
    assert client.get(f"/staff{LISTING}", headers={"X-Demo-Token": DEMO_TOKEN}).status_code == 401
    assert client.get(f"/staff{LISTING}", auth=DEMO_LOGIN).status_code == 200


@pytest.mark.parametrize("prefix", ["/members", "/staff"])
def test_behind_the_door_only_the_catalogue(client: httpx.Client, prefix: str) -> None:
    login: dict[str, Any] = {"headers": {"X-Demo-Token": DEMO_TOKEN}, "auth": DEMO_LOGIN}
    home = client.get(f"{prefix}/", **login)
    assert (home.status_code, home.headers["location"]) == (301, f"{prefix}{LISTING}")
    assert client.get(f"{prefix}/robots.txt", **login).status_code == 404
    assert client.get(f"{prefix}/catalogue/page-999.html", **login).status_code == 404


def test_open_pages_are_as_they_were(client: httpx.Client) -> None:
    assert client.get(LISTING).status_code == 200
    assert client.get("/membership.html").status_code == 404

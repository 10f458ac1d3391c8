"""Fixtures: a small demo site served from a background thread, and an httpx client for it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sluice_tools.demosite import RunningDemoSite, running_demo_site


@pytest.fixture
def site() -> Iterator[RunningDemoSite]:
    """A fresh 200-book site on a free 127.0.0.1 port."""
    with running_demo_site(books=200) as running:
        yield running


@pytest.fixture
def client(site: RunningDemoSite) -> Iterator[httpx.Client]:
    """A client bound to the site that never follows redirects and never leaves 127.0.0.1."""
    with httpx.Client(base_url=site.base_url, timeout=10, follow_redirects=False, trust_env=False) as c:
        yield c

"""robots.txt once per origin per run, for every fetcher of the run: shared through the object store.

Each fetcher (a Lambda container, a local worker) keeps its own robots cache; without sharing, a
site sees its robots.txt asked once per container. Here the first fetcher to need an origin's
robots.txt takes a marker (a conditional write: one wins), fetches it and stores the answer under
the run's work prefix; the others wait for that answer, and fetch it themselves only if it does
not come within :data:`WAIT_S` (the winner died). A failure (robots.txt unreachable, 429, 5xx) is
shared too, but only for :data:`FAILURE_TTL_S`, as the fetcher's own cache keeps it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

from sluice.domain.clock import SYSTEM_CLOCK, Clock
from sluice.domain.errors import StoreError
from sluice.domain.layout import robots_key
from sluice.fetch.robots import RobotsResponse
from sluice.observability import logger
from sluice.ports import ObjectStore

WAIT_S = 10.0
POLL_S = 0.1
FAILURE_TTL_S = 300.0


class SharedRobots:
    """:class:`sluice.fetch.robots.RobotsStore` for one run, on its object store.

    A shared failure is stamped with ``clock`` (the pipeline's time), and read against it by every fetcher;
    the wait for another fetcher's answer is a duration, measured on ``time.monotonic()``."""

    def __init__(self, objects: ObjectStore, crawl: str, run_id: str, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.objects, self.crawl, self.run_id = objects, crawl, run_id
        self.clock = clock

    async def get(self, robots_url: str) -> RobotsResponse | None:
        key = robots_key(self.crawl, self.run_id, robots_url)
        try:
            found, stored = await self._read(key)
            if found is not None or stored:
                return found  # shared, or a shared failure past its time (then every fetcher asks again)
            if await asyncio.to_thread(self.objects.put_new, f"{key}.taken", b"", "text/plain"):
                return None  # this fetcher fetches it
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                found, stored = await self._read(key)
                if stored:
                    return found
        # Sharing is an economy, never a reason to fail a page: the store failed, or what it holds is no answer
        # (not JSON or base64: ValueError; fields of other types: TypeError). This fetcher asks the site itself.
        except (StoreError, ValueError, TypeError) as exc:
            logger.warning("shared robots.txt unreadable", extra={"robots": robots_url, "error": repr(exc)})
        return None

    async def put(self, robots_url: str, answer: RobotsResponse) -> None:
        body = {
            "status": answer.status,
            "body": base64.b64encode(answer.body).decode("ascii"),
            "error": answer.error,
            "permanent": answer.permanent,
            "at": self.clock(),
        }
        key = robots_key(self.crawl, self.run_id, robots_url)
        try:
            await asyncio.to_thread(self.objects.put, key, json.dumps(body).encode(), "application/json")
        except StoreError as exc:
            logger.warning("shared robots.txt not stored", extra={"robots": robots_url, "error": repr(exc)})

    async def _read(self, key: str) -> tuple[RobotsResponse | None, bool]:
        """The shared answer (None if there is none, or if it is a failure past its time), and whether one is stored."""
        raw = await asyncio.to_thread(self.objects.get, key)
        if raw is None:
            return None, False
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"{key}: not a shared answer ({type(data).__name__})")
        status = data.get("status")
        permanent = bool(data.get("permanent"))
        failed = status is None or status == 429 or status >= 500
        if failed and not permanent and self.clock() - float(data.get("at", 0)) > FAILURE_TTL_S:
            return None, True
        body = base64.b64decode(data.get("body") or "")
        return RobotsResponse(status, body, data.get("error"), permanent), True

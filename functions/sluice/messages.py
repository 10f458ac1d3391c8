"""The events and queue messages the functions exchange, validated at the edge.

A message that does not parse is a :class:`MalformedMessage` naming what is wrong; it is never
half-processed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

CrawlName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
RunId = Annotated[str, Field(pattern=r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")]


class MalformedMessage(ValueError):
    """An event or message body that is not what its function takes; the text says what is wrong."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UrlTask(_Message):
    """One URL of a run, and how many link hops it is from a seed."""

    url: Annotated[str, Field(min_length=8, max_length=2048)]
    depth: Annotated[int, Field(ge=0, le=100)] = 0
    parent: str | None = None


class CrawlMessage(_Message):
    """An SQS message: several URLs of one run, so a million seeds cost a tenth as many messages."""

    v: Literal[1] = 1
    crawl: CrawlName
    run_id: RunId
    tasks: Annotated[list[UrlTask], Field(min_length=1, max_length=50)]


class StartEvent(_Message):
    """What starts a run: the EventBridge schedule's input, or ``sluice start``. ``offset`` continues a fan-out.

    ``trigger`` is the id of the schedule's event: Lambda's retry of a failed start carries the same
    one, so a start that died mid-fan-out resumes its own run instead of being refused by it.
    """

    crawl: CrawlName
    run_id: RunId | None = None
    offset: Annotated[int, Field(ge=0)] = 0
    trigger: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class FinalizeEvent(_Message):
    """Finalize one run, or (no run id) sweep every open run of every crawl that is done or overdue."""

    crawl: CrawlName | None = None
    run_id: RunId | None = None


M = TypeVar("M", bound=_Message)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(body)'}: {e['msg']}" for e in exc.errors())


def parse_body(model: type[M], body: str | bytes | dict[str, Any]) -> M:
    """Parse a JSON body (or an already-decoded event) into ``model``, or raise MalformedMessage."""
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedMessage(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise MalformedMessage(f"body is a JSON {type(body).__name__}, not an object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise MalformedMessage(f"not a valid {model.__name__}: {_problems(exc)}") from exc

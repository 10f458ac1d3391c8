"""How the crawl treats the sites it visits: ``politeness`` (concurrency, delays, timeouts, caps), retries and
the breaker that pauses a host refusing the crawler."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from sluice.spec.values import StrictModel

DEFAULT_USER_AGENT = "Sluice/0.1 (a polite scheduled crawler)"
DEFAULT_RETRY_STATUSES = (408, 429, 500, 502, 503, 504)


class RetryPolicy(StrictModel):
    """How often and how patiently a page is retried."""

    times: int = Field(default=3, ge=0, le=10)
    status_codes: list[int] = Field(default_factory=lambda: list(DEFAULT_RETRY_STATUSES))
    backoff_base_seconds: float = Field(default=0.5, gt=0, le=60)
    backoff_max_seconds: float = Field(default=30.0, gt=0, le=900)
    retry_after_max_seconds: float = Field(default=120.0, ge=0, le=900)

    @field_validator("status_codes")
    @classmethod
    def _statuses(cls, codes: list[int]) -> list[int]:
        for code in codes:
            if not 400 <= code <= 599:
                raise ValueError(f"{code} is not an HTTP error status (400-599)")
        return codes


class Breaker(StrictModel):
    """When a host is taken to refuse the crawler: it is paused for the run, its URLs skipped with the reason."""

    enabled: bool = True
    min_answers: int = Field(default=20, ge=1, le=100_000)
    """Answers counted since the host's first refusal in the run before the share is judged."""
    max_blocked_share: float = Field(default=0.5, gt=0, le=1)
    """The breaker trips when more of those answers than this are refusals."""
    statuses: list[int] = Field(default_factory=lambda: [403, 429], max_length=20)
    """Statuses that count as a refusal (a 429 that sends Retry-After is throttling, obeyed, not counted)."""
    markers: list[Annotated[str, Field(min_length=3, max_length=200)]] = Field(default_factory=list, max_length=20)
    """Texts whose presence in a page makes it a refusal (a captcha or block page served with 200)."""

    @field_validator("statuses")
    @classmethod
    def _http_statuses(cls, value: list[int]) -> list[int]:
        bad = [s for s in value if not 400 <= s <= 599]
        if bad:
            raise ValueError(f"refusal statuses are 4xx or 5xx, not {bad}")
        return value


class Politeness(StrictModel):
    """What the crawl promises the sites it visits: every per-host limit holds for the whole fleet."""

    concurrency: int = Field(default=32, ge=1, le=512)
    concurrency_per_domain: int = Field(default=8, ge=1, le=128)
    min_delay_seconds: float = Field(default=0.0, ge=0, le=300)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1, max_length=512)
    obey_robots: bool = True
    timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    max_body_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    max_redirects: int = Field(default=5, ge=0, le=20)
    content_types: list[str] = Field(default_factory=lambda: ["text/html", "application/xhtml+xml"])
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    adaptive: bool = True
    """Lower a host's concurrency below ``concurrency_per_domain`` when it slows down or answers 429/503,
    and raise it back while its latency stays flat (never above the cap)."""
    breaker: Breaker = Field(default_factory=Breaker)

    @field_validator("user_agent")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if any(c in value for c in "\r\n"):
            raise ValueError("a user agent is one line")
        return value

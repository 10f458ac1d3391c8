"""Runtime behaviour of the demo site: latency, robots and fault injection."""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024
DEMO_TOKEN = "demo-token-not-a-secret"  # noqa: S105 - the demo site's test value, public by design
DEMO_LOGIN = ("reader", "demo-password-not-a-secret")


@dataclass(frozen=True)
class DemoSiteConfig:
    """Knobs that change how (not what) the demo site answers; see faults.py for the fault rule."""

    latency_ms: float = 0.0
    """Added (asyncio.sleep) before every answer except /_demo/ endpoints."""
    latency_per_request_ms: float = 0.0
    """Added for each request of the same host in flight beyond ``latency_knee``: a server that slows under load."""
    latency_knee: int = 1
    ban_after: int | None = None
    """After this many requests (since reset), every answer is a 403: a host that turns against the crawler."""
    crawl_delay: float | None = None
    """Emitted as `Crawl-delay` in /robots.txt when set."""
    fail_503_fraction: float = 0.0
    fail_429_fraction: float = 0.0
    retry_after_seconds: int = 1
    """Retry-After (delta seconds) sent with injected 429s."""
    reset_fraction: float = 0.0
    """Headers and half the body are sent, then the connection is aborted."""
    slow_body_fraction: float = 0.0
    slow_body_seconds: float = 1.0
    """A slow body is trickled in ten chunks spread over this many seconds."""
    oversized_fraction: float = 0.0
    oversized_bytes: int = 50 * MB
    """Size of the streamed body of an oversized answer (Content-Length is sent)."""
    fault_seed: int = 0
    faulty_attempts: int | None = 3
    """Only the first N requests to a path (since reset) may fault; None = every request."""
    log_limit: int = 100_000
    """At most this many request records are kept in stats.log (oldest dropped)."""
    access_token: str = DEMO_TOKEN
    """What /members/ pages want in the X-Demo-Token header or the demo_session cookie (access.py)."""
    staff_login: tuple[str, str] = DEMO_LOGIN
    """The user name and password /staff/ pages want, by HTTP basic auth."""

    def __post_init__(self) -> None:
        fractions = (
            self.fail_503_fraction,
            self.fail_429_fraction,
            self.reset_fraction,
            self.slow_body_fraction,
            self.oversized_fraction,
        )
        if any(f < 0 for f in fractions) or sum(fractions) > 1.0 + 1e-9:
            raise ValueError("fault fractions must be >= 0 and sum to at most 1")
        if self.latency_ms < 0 or self.slow_body_seconds < 0 or self.retry_after_seconds < 0:
            raise ValueError("latency_ms, slow_body_seconds and retry_after_seconds must be >= 0")
        if self.latency_per_request_ms < 0 or self.latency_knee < 0 or (self.ban_after or 0) < 0:
            raise ValueError("latency_per_request_ms, latency_knee and ban_after must be >= 0")
        if self.oversized_bytes < 0 or self.log_limit < 0:
            raise ValueError("oversized_bytes and log_limit must be >= 0")

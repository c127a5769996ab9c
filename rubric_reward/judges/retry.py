"""The one retry policy: which failures are retried, and how long to wait before the next attempt.

Exponential backoff with jitter (half the step fixed, half random) from ``base_s`` up to ``max_s``;
a server's Retry-After wins over the backoff, and one longer than ``max_s`` ends the retries (we do
not hammer a server that asked for a long pause). Retried: 429, 5xx, timeouts, connection errors
and malformed bodies (reported as server errors). Not retried: other 4xx, content filters.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from ..results import ErrorKind

__all__ = ["RETRYABLE", "RetryPolicy", "parse_retry_after"]

RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT, ErrorKind.CONNECTION})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_s: float = 0.5
    max_s: float = 30.0

    @classmethod
    def from_config(cls, config) -> RetryPolicy:
        return cls(config.max_retries, config.backoff_base_s, config.backoff_max_s)

    def delay(self, retry_no: int, retry_after_s: float | None = None) -> float | None:
        """Seconds before retry ``retry_no`` (1-based); None if the server asks for more than ``max_s``."""
        if retry_after_s is not None:
            if retry_after_s > self.max_s:
                return None
            return retry_after_s + random.uniform(0.0, min(self.base_s, 0.1 * retry_after_s + 0.01))
        step = min(self.max_s, self.base_s * 2.0 ** (retry_no - 1))
        return step / 2 + random.uniform(0.0, step / 2)


def parse_retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())

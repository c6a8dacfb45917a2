"""How long an HTTP reply asks its client to wait: the `Retry-After` header (RFC 9110 10.2.3), in
seconds or as an HTTP date, capped. Shared by every client that retries (the policy and user
endpoints in trainer/rollout/http.py, the judge in trainer/env/grading/judge.py)."""

from __future__ import annotations

import email.utils
import time

import httpx


def retry_after(response: httpx.Response, cap: float) -> float | None:
    """The seconds a `Retry-After` header asks to wait (a number or an HTTP date), at most `cap`;
    None when there is no readable one."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), cap)

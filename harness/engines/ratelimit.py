"""A requests- and tokens-per-minute limit shared by an engine's threads (token buckets).

Each bucket holds at most one minute's allowance and refills continuously; a request waits
until both buckets can pay for it. The tokens a request will cost are not known before it is
answered, so it pays an estimate up front (its prompt's characters / 4 plus its max_tokens)
and `spent` settles the difference once the endpoint reports its usage.
"""

from __future__ import annotations

import threading
import time


class _Bucket:
    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = per_minute
        self.level = per_minute
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` is in the bucket (a request larger than a minute's allowance
        waits for a full bucket)."""
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate)


class RateLimiter:
    def __init__(
        self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self._estimates: dict[int, float] = {}  # thread id -> its last estimate

    def acquire(self, estimated_tokens: int) -> None:
        """Block until one request of about `estimated_tokens` tokens fits both limits."""
        if self._requests is None and self._tokens is None:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                waits = []
                for bucket, amount in ((self._requests, 1), (self._tokens, estimated_tokens)):
                    if bucket is not None:
                        bucket.refill(now)
                        waits.append(bucket.wait_for(amount))
                wait = max(waits)
                if wait <= 0:
                    if self._requests is not None:
                        self._requests.level -= 1
                    if self._tokens is not None:
                        self._tokens.level -= estimated_tokens
                        self._estimates[threading.get_ident()] = estimated_tokens
                    return
            time.sleep(min(wait, 1.0))

    def spent(self, tokens: int) -> None:
        """Settle this thread's last estimate against the tokens the endpoint counted."""
        if self._tokens is None:
            return
        with self._lock:
            estimate = self._estimates.pop(threading.get_ident(), 0)
            self._tokens.level += estimate - tokens

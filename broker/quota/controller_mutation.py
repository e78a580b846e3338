"""controller_mutation_rate (KIP-599, Kafka's ControllerMutationQuotaManager): partitions created or
deleted per second by CreateTopics, CreatePartitions and DeleteTopics, per (user, client-id) with
the precedence of entity.find_quota.

The stat is Kafka's TokenBucket, not the sampled Rate: a bucket of `quota x
controller.quota.window.num x controller.quota.window.size.seconds` tokens, refilled at `quota`
per second, each partition taking one; it is violated while it holds fewer than none, and the
throttle time is how long the refill takes to bring it back to zero (-tokens / quota s).

A request's quota is strict from the versions Kafka makes it so (CreateTopics v6, DeleteTopics v5,
CreatePartitions v3): a topic that arrives while the bucket is below zero is refused with
THROTTLING_QUOTA_EXCEEDED and nothing is recorded for it, else its partitions are taken (the bucket
may go below zero: the next topic or request is refused). Older versions are permissive: every
topic is recorded and the request only reports the throttle time.
"""

from __future__ import annotations

import time

from broker.quota.entity import CONTROLLER_MUTATION_RATE, Entity, find_quota
from protocol.errors import ErrorCode, KafkaProtocolError


class TokenBucket:
    def __init__(self, burst: float, now_ms: float) -> None:
        self.tokens = burst
        self.last_ms = now_ms

    def refill(self, quota: float, burst: float, now_ms: float) -> float:
        self.tokens = min(burst, self.tokens + quota * max(0.0, now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens


class ControllerMutationQuotaManager:
    def __init__(self, quotas: dict[Entity, dict[str, float]], *, samples: int = 11, window_s: int = 1) -> None:
        self.quotas = quotas
        self.span_s = samples * window_s
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def new_quota_for(self, user: str, client_id: str, strict: bool) -> ControllerMutationQuota | None:
        """A request's quota; None when the client has none (UnboundedControllerMutationQuota)."""
        found = find_quota(self.quotas, CONTROLLER_MUTATION_RATE, user, client_id) if self.quotas else None
        if found is None:
            return None
        return ControllerMutationQuota(self, found[0], found[1], strict)

    def bucket(self, tags: tuple[str, str], quota: float, now_ms: float) -> TokenBucket:
        b = self._buckets.get(tags)
        if b is None:
            b = self._buckets[tags] = TokenBucket(quota * self.span_s, now_ms)
        b.refill(quota, quota * self.span_s, now_ms)
        return b


class ControllerMutationQuota:
    """Strict- or PermissiveControllerMutationQuota of one request."""

    def __init__(self, manager: ControllerMutationQuotaManager, quota: float, tags: tuple[str, str],
                 strict: bool) -> None:
        self.manager = manager
        self.quota = quota
        self.tags = tags
        self.strict = strict
        self.throttle_time_ms = 0

    def _throttle_ms(self, tokens: float) -> int:
        return round(-tokens / self.quota * 1000) if self.quota > 0 else 1000 * self.manager.span_s

    def record(self, permits: float, now_ms: float | None = None) -> None:
        """Take `permits` partitions; strict: THROTTLING_QUOTA_EXCEEDED (nothing taken) while the
        bucket is below zero."""
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        bucket = self.manager.bucket(self.tags, self.quota, now)
        if self.strict:
            if bucket.tokens < 0:
                self.throttle_time_ms = self._throttle_ms(bucket.tokens)
                raise KafkaProtocolError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                         "The throttling quota has been exceeded.")
            bucket.tokens -= permits
            return
        bucket.tokens -= permits
        if bucket.tokens < 0:
            self.throttle_time_ms = self._throttle_ms(bucket.tokens)

"""Kafka's ClientQuotaManager: sampled rates per (user, client-id) and the throttle time of a
violation, for one quota type (produce bytes, fetch bytes, request time, controller mutations).

The rate is the Rate of broker.replication_quota (Kafka's SampledStat: `quota.window.num` windows
of `quota.window.size.seconds`, a young rate measured over at least num - 1 windows). A value is
recorded first, then the rate is measured (Sensor.record then checkQuotas): over the bound, the
throttle time is QuotaUtils.throttleTime -- (rate - bound) / bound x the span the rate was measured
over, rounded -- the time after which the rate would be back at the bound if nothing more came.
The request-time manager caps it at one window (ClientRequestQuotaManager's boundedThrottleTime).

Which quota applies and who shares it is entity.find_quota. Rates of (user, client-id) pairs idle
for an hour are dropped when a new one is made, as Kafka expires its quota sensors, so that
short-lived client-ids do not grow the broker without bound.
"""

from __future__ import annotations

import time

from broker.quota.entity import Entity, find_quota
from broker.replication_quota import Rate

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds


class ClientQuotaManager:
    """One quota type's rates; `quotas` is the shared (entity -> key -> bound) map the config
    handlers update, read at every record so a change applies at once."""

    def __init__(self, key: str, quotas: dict[Entity, dict[str, float]], *, samples: int = 11,
                 window_s: int = 1, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.quotas = quotas
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self._rates: dict[tuple[str, str], tuple[Rate, list[float]]] = {}  # tags -> rate, [last used]

    def quotas_enabled(self) -> bool:
        return any(self.key in c for c in self.quotas.values())

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        now_ms: float | None = None) -> int:
        """Record `value` for a connection of (sanitized) `user` and `client_id`; the throttle
        time in ms (0 when within its quota or when it has none)."""
        found = find_quota(self.quotas, self.key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        entry = self._rates.get(tags)
        if entry is None:
            self._expire(now)
            entry = self._rates[tags] = (Rate(self.samples, self.window_ms), [now])
        rate, last = entry
        last[0] = now
        rate.record(value, now)
        measured = rate.measure(now)
        if measured <= bound:
            return 0
        return self.throttle_time_ms(measured, bound, rate.window_size(now))

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """getMaxValueInQuotaWindow: the most the quota lets through in the measured span (a
        fetch is bounded by it, so one response can never be over the quota by itself)."""
        found = find_quota(self.quotas, self.key, user, client_id)
        return None if found is None else found[0] * (self.samples - 1) * self.window_ms / 1000

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float | None = None) -> None:
        """Take back a value recorded for a response that is not sent (unrecordQuotaSensor)."""
        found = find_quota(self.quotas, self.key, user, client_id)
        entry = self._rates.get(found[1]) if found is not None else None
        if entry is not None:
            entry[0].record(-value, time.monotonic() * 1000 if now_ms is None else now_ms)

    def throttle_time_ms(self, measured: float, bound: float, window_ms: float) -> int:
        """QuotaUtils.throttleTime (bounded by max_throttle_ms when set)."""
        if bound <= 0:  # a zero quota: throttle as long as Kafka's bounded managers allow
            t = self.max_throttle_ms if self.max_throttle_ms is not None else int(window_ms)
        else:
            t = round((measured - bound) / bound * window_ms)
        return min(t, self.max_throttle_ms) if self.max_throttle_ms is not None else t

    def _expire(self, now: float) -> None:
        for tags in [t for t, (_, last) in self._rates.items() if now - last[0] > INACTIVE_SENSOR_EXPIRATION_MS]:
            del self._rates[tags]

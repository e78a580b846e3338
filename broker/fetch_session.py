"""Fetch sessions (KIP-227): incremental fetch requests, as Kafka's FetchManager serves them.

Why: Java clients (and kafka-python) open a session with their first full fetch (session id 0,
epoch 0) and then send only what changed; the broker remembers the partitions and answers only
those with news (new records, a moved high watermark or log start offset, an error). Without
sessions their fetches still work but every response re-lists every partition.

Rules (Kafka's FetchSession.scala): epoch 0 or -1 is a full fetch; a full fetch naming a session
closes it; epoch -1 creates no session. Otherwise the session must exist
(FETCH_SESSION_ID_NOT_FOUND) and its epoch match (INVALID_FETCH_SESSION_EPOCH); the request's
partitions are added or updated, the forgotten ones removed, and the epoch advances (wrapping
from int32 max to 1). A partition that responds in an incremental fetch moves to the end of the
session's order, so partitions take turns at the response size limit. Sessions unused for
`eviction_ms` are evicted first when the cache is full; otherwise the smallest unprivileged one
is, when the new one is larger.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class PartitionRequest:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class CachedPartition:
    req: PartitionRequest
    high_watermark: int = -1
    log_start_offset: int = -1

    def would_respond(self, has_records: bool, high_watermark: int, log_start_offset: int, error: int,
                      news: bool = False) -> bool:
        """must_respond's answer without updating anything (Kafka's maybeUpdateResponseData with
        updateResponseData = false, for getResponseSize)."""
        return (has_records or news or bool(error) or self.high_watermark != high_watermark
                or self.log_start_offset != log_start_offset)

    def must_respond(self, has_records: bool, high_watermark: int, log_start_offset: int, error: int,
                     news: bool = False) -> bool:
        """Kafka's maybeUpdateResponseData, always updating. `news`: the result carries a
        preferred read replica or a diverging epoch, which the client must see."""
        respond = has_records or news
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.log_start_offset != log_start_offset:
            respond = True
            self.log_start_offset = log_start_offset
        if error:
            self.high_watermark = -1  # resend when the error clears
            respond = True
        return respond


@dataclass
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[Key, CachedPartition]  # insertion order is the fetch order
    created_ms: int
    last_used_ms: int
    epoch: int = field(default=1)


class FetchContext:
    """What one fetch request reads and how its response is shaped."""

    def __init__(self, kind: str, partitions: dict[Key, PartitionRequest], session: FetchSession | None = None,
                 error: int = 0, cache: FetchSessionCache | None = None, privileged: bool = False,
                 now_ms: int = 0) -> None:
        self.kind = kind  # "sessionless", "full", "incremental", "error"
        self.partitions = partitions
        self.session = session
        self.error = error
        self.cache = cache
        self.privileged = privileged
        self.now_ms = now_ms
        self.response_session_id = session.id if session is not None else INVALID_SESSION_ID

    def peek(self, results: dict[Key, Any]) -> list[Key]:
        """The partitions `select` would put in the response, changing nothing (no session
        created, an incremental session's cached state left as it was): Kafka's
        getResponseSize, which the fetch quota records before deciding to throttle."""
        if self.kind == "error":
            return []
        if self.kind != "incremental":
            return list(results)
        assert self.session is not None
        parts = self.session.partitions
        return [key for key, r in results.items() if (cp := parts.get(key)) is not None and cp.would_respond(
            r.records_size > 0, r.high_watermark, r.log_start_offset, r.error,
            r.preferred_read_replica >= 0 or r.diverging_epoch is not None)]

    def select(self, results: dict[Key, Any]) -> list[Key]:
        """Which partitions go in the response, in order. `results[key]` has `records_size`,
        `high_watermark`, `log_start_offset`, `error`, `preferred_read_replica`, `diverging_epoch`.
        Creates the session of a full fetch."""
        if self.kind == "error":
            return []
        if self.kind == "sessionless":
            return list(results)
        if self.kind == "full":
            assert self.cache is not None
            cached = {
                k: CachedPartition(req, results[k].high_watermark, results[k].log_start_offset)
                for k, req in self.partitions.items()
            }
            self.response_session_id = self.cache.maybe_create(self.now_ms, self.privileged, cached)
            return list(results)
        assert self.session is not None
        chosen = []
        parts = self.session.partitions
        for key, r in results.items():
            cp = parts.get(key)
            if cp is None:
                continue
            news = r.preferred_read_replica >= 0 or r.diverging_epoch is not None
            if cp.must_respond(r.records_size > 0, r.high_watermark, r.log_start_offset, r.error, news):
                chosen.append(key)
                parts[key] = parts.pop(key)  # to the back of the order
        return chosen


class FetchSessionCache:
    """Bounded cache of sessions (max.incremental.fetch.session.cache.slots, default 1000)."""

    def __init__(self, max_sessions: int = 1000, eviction_ms: int = 120_000) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = random.Random()

    def new_context(self, session_id: int, epoch: int, fetch: dict[Key, PartitionRequest],
                    forgotten: list[Key], privileged: bool, now_ms: int) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", fetch)
            return FetchContext("full", fetch, cache=self, privileged=privileged, now_ms=now_ms)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext("error", {}, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext("error", {}, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for key, req in fetch.items():
            cp = session.partitions.get(key)
            if cp is None:
                session.partitions[key] = CachedPartition(req)
            else:
                cp.req = req
        for key in forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            self.sessions.pop(session.id, None)
            return FetchContext("sessionless", fetch)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        reqs = {k: cp.req for k, cp in session.partitions.items()}
        return FetchContext("incremental", reqs, session=session)

    def maybe_create(self, now_ms: int, privileged: bool, partitions: dict[Key, CachedPartition]) -> int:
        """Create a session unless the cache is full and nothing can be evicted; 0 = none."""
        if len(self.sessions) >= self.max_sessions and not self._evict_one(now_ms, privileged, len(partitions)):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions, now_ms, now_ms)
        return session_id

    def _evict_one(self, now_ms: int, privileged: bool, size: int) -> bool:
        stalest = min(self.sessions.values(), key=lambda s: s.last_used_ms, default=None)
        if stalest is not None and now_ms - stalest.last_used_ms > self.eviction_ms:
            del self.sessions[stalest.id]
            return True
        candidates = [
            s for s in self.sessions.values()
            if (not s.privileged or now_ms - s.created_ms > self.eviction_ms)
            and (privileged or now_ms - s.created_ms > self.eviction_ms)
        ]
        victim = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.id), default=None)
        if victim is None or (victim.privileged, len(victim.partitions)) > (privileged, size):
            return False
        del self.sessions[victim.id]
        return True

    def _new_id(self) -> int:
        for _ in itertools.count():
            sid = self._rng.randint(1, INT32_MAX)
            if sid not in self.sessions:
                return sid
        raise AssertionError("unreachable")

"""FetchContext.peek (the partitions a response would carry, for the fetch quota's response
size) answers what select would, and changes nothing: a throttled incremental fetch must leave
its session as it was, so the next fetch still reports the changes."""

from __future__ import annotations

from types import SimpleNamespace

from broker.fetch_session import CachedPartition, FetchContext, FetchSession, PartitionRequest


def result(records: int = 0, hw: int = 5, error: int = 0) -> SimpleNamespace:
    return SimpleNamespace(records_size=records, high_watermark=hw, log_start_offset=0, error=error,
                           preferred_read_replica=-1, diverging_epoch=None)


def test_peek_answers_as_select_without_updating_the_session() -> None:
    req = PartitionRequest(fetch_offset=0, max_bytes=100)
    parts = {("t", p): CachedPartition(req, high_watermark=5, log_start_offset=0) for p in range(4)}
    session = FetchSession(id=1, privileged=False, partitions=parts, created_ms=0, last_used_ms=0)
    fctx = FetchContext("incremental", {}, session)
    results = {("t", 0): result(), ("t", 1): result(records=10), ("t", 2): result(hw=6), ("t", 3): result(error=6)}
    assert fctx.peek(results) == [("t", 1), ("t", 2), ("t", 3)]
    assert fctx.peek(results) == [("t", 1), ("t", 2), ("t", 3)]  # nothing changed by the first
    assert [(cp.high_watermark, cp.log_start_offset) for cp in parts.values()] == [(5, 0)] * 4
    assert fctx.select(results) == [("t", 1), ("t", 2), ("t", 3)]
    assert parts[("t", 2)].high_watermark == 6  # select updates; the next peek sees no change there
    assert ("t", 2) not in fctx.peek(results)


def test_peek_of_a_full_fetch_creates_no_session() -> None:
    req = PartitionRequest(fetch_offset=0, max_bytes=100)
    fctx = FetchContext("full", {("t", 0): req}, cache=None)
    assert fctx.peek({("t", 0): result()}) == [("t", 0)]  # select would need the cache

"""The replica fetchers' side of a fetch session (broker.fetch_session_handler), driven against the
leader's side (broker.fetch_session.FetchSessionCache) so that both halves of KIP-227 agree:
a full fetch opens the session, incremental ones name only moved partitions and list dropped ones
as forgotten, and every session error or lost request leads to one full fetch."""

from __future__ import annotations

from types import SimpleNamespace

from broker.fetch_session import FetchSessionCache, PartitionRequest
from broker.fetch_session_handler import FetchPosition, FetchRequestData, FetchSessionHandler
from protocol.errors import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def pos(offset: int, epoch: int = 1) -> FetchPosition:
    return FetchPosition(fetch_offset=offset, log_start_offset=0, current_leader_epoch=epoch,
                         last_fetched_epoch=epoch, max_bytes=1 << 20)


def serve(cache: FetchSessionCache, data: FetchRequestData, news: set[tuple[str, int]],
          preferred: dict[tuple[str, int], int] | None = None,
          diverging: frozenset[tuple[str, int]] = frozenset()) -> tuple[int, int, set]:
    """The leader's answer to `data`: (error, session id, partitions in the response); `news` are
    the partitions with new records, `preferred` those answered with a preferred read replica,
    `diverging` those answered with a diverging epoch."""
    fetch = {tp: PartitionRequest(fetch_offset=p.fetch_offset, max_bytes=p.max_bytes) for tp, p in data.to_send.items()}
    fctx = cache.new_context(data.session_id, data.epoch, fetch, data.to_forget, True, 0)
    if fctx.error:
        return fctx.error, 0, set()
    results = {tp: SimpleNamespace(records_size=100 if tp in news else 0, high_watermark=5, log_start_offset=0,
                                   error=0, preferred_read_replica=(preferred or {}).get(tp, -1),
                                   diverging_epoch=(1, 3) if tp in diverging else None)
               for tp in fctx.partitions}
    chosen = fctx.select(results)
    return 0, fctx.response_session_id, set(chosen)


def test_full_then_incremental_naming_only_what_moved() -> None:
    cache, handler = FetchSessionCache(), FetchSessionHandler()
    first = handler.build({A: pos(0), B: pos(0)})
    assert first.full and first.session_id == 0 and set(first.to_send) == {A, B}
    error, sid, answered = serve(cache, first, news={A})
    assert sid != 0 and answered == {A, B}  # a full response lists everything
    assert handler.handle_response(error, sid, answered)
    # A moved to 3; B did not: only A is named, at epoch 1 of the session
    second = handler.build({A: pos(3), B: pos(0)})
    assert (second.session_id, second.epoch, set(second.to_send), second.to_forget) == (sid, 1, {A}, [])
    error, sid2, answered = serve(cache, second, news=set())
    assert sid2 == sid and answered == set()  # nothing new: the leader answers no partition
    assert handler.handle_response(error, sid2, answered)
    # B dropped (its leader moved), C added
    third = handler.build({A: pos(3), C: pos(7)})
    assert (third.epoch, set(third.to_send), third.to_forget) == (2, {C}, [B])
    error, _, answered = serve(cache, third, news={C})
    assert answered == {C} and set(cache.sessions[sid].partitions) == {A, C}
    assert handler.handle_response(error, sid, answered)
    # a new leader epoch is a change too, even at the same offset
    assert set(handler.build({A: pos(3, epoch=2), C: pos(7)}).to_send) == {A}


def test_an_incremental_response_names_a_preferred_read_replica_or_a_diverging_epoch() -> None:
    """Kafka's maybeUpdateResponseData: a partition whose answer carries a preferred read replica
    (KIP-392) or a diverging epoch is in the response though its high watermark and log start did
    not move and it has no records -- else the consumer would never learn where to fetch (fails
    without `news` in CachedPartition.must_respond)."""
    cache, handler = FetchSessionCache(), FetchSessionHandler()
    first = handler.build({A: pos(0), B: pos(0), C: pos(0)})
    error, sid, answered = serve(cache, first, news=set())
    assert handler.handle_response(error, sid, answered)
    second = handler.build({A: pos(0), B: pos(0), C: pos(0)})
    assert second.session_id == sid and not second.full
    error, _, answered = serve(cache, second, news=set(), preferred={A: 2}, diverging=frozenset({B}))
    assert answered == {A, B}  # C: nothing new


def test_a_leader_that_lost_the_session_gets_a_full_fetch_next() -> None:
    handler = FetchSessionHandler()
    cache = FetchSessionCache()
    error, sid, answered = serve(cache, handler.build({A: pos(0)}), news=set())
    assert handler.handle_response(error, sid, answered)
    restarted = FetchSessionCache()  # the leader restarted: it knows no session
    error, _, answered = serve(restarted, handler.build({A: pos(4)}), news=set())
    assert error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert not handler.handle_response(error, 0, answered)
    again = handler.build({A: pos(4)})
    assert again.full and again.session_id == 0 and set(again.to_send) == {A}


def test_an_epoch_mismatch_or_a_lost_request_closes_the_session_with_a_full_fetch() -> None:
    cache, handler = FetchSessionCache(), FetchSessionHandler()
    error, sid, answered = serve(cache, handler.build({A: pos(0)}), news=set())
    handler.handle_response(error, sid, answered)
    handler.build({A: pos(1)})
    handler.handle_error()  # the request's fate is unknown (connection lost)
    retry = handler.build({A: pos(1)})
    assert retry.full and retry.session_id == sid  # epoch 0 with the old id: closes it, opens a new one
    error, new_sid, answered = serve(cache, retry, news=set())
    assert sid not in cache.sessions and new_sid in cache.sessions
    assert handler.handle_response(error, new_sid, answered)
    assert handler.build({A: pos(1)}).epoch == 1
    # the leader answers INVALID_FETCH_SESSION_EPOCH: full next, keeping the id to close it
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, set())
    assert handler.build({A: pos(1)}).full


def test_a_response_naming_a_partition_outside_the_session_is_not_used() -> None:
    handler = FetchSessionHandler()
    handler.build({A: pos(0)})
    assert handler.handle_response(0, 42, {A})
    handler.build({A: pos(1)})
    assert not handler.handle_response(0, 42, {A, C})
    assert handler.build({A: pos(1)}).full


def test_a_leader_without_room_for_a_session_is_fetched_from_in_full() -> None:
    cache, handler = FetchSessionCache(max_sessions=0), FetchSessionHandler()
    error, sid, answered = serve(cache, handler.build({A: pos(0)}), news=set())
    assert sid == 0 and handler.handle_response(error, sid, answered)
    assert handler.build({A: pos(0)}).full

"""broker.network_client, the parts without sockets: Kafka's ExponentialBackoff, the per-node
connection states (ClusterConnectionStates), correlation bookkeeping (InFlightRequests), cutting
response frames out of a byte stream, the ApiVersions v0 fallback decode and version choice."""

from __future__ import annotations

import random

import pytest

from broker.network_client import (
    API_VERSIONS_VERSION,
    ConnectionState,
    CorrelationIdMismatchError,
    ExponentialBackoff,
    InFlightRequest,
    InFlightRequests,
    NodeApiVersions,
    NodeConnection,
    ResponseReceiver,
    UnsupportedApiVersionError,
    decode_response_frame,
)
from protocol.framing import encode_response_frame
from protocol.messages import REQUESTS, ApiVersionsResponse, MetadataResponse
from protocol.messages.api_versions_response import ApiVersion

# -- ExponentialBackoff ------------------------------------------------------------------------


def test_backoff_without_jitter_doubles_up_to_the_max() -> None:
    b = ExponentialBackoff(50, 2, 1000, 0.0)
    assert [b.backoff_ms(n) for n in range(8)] == [50, 100, 200, 400, 800, 1000, 1000, 1000]


def test_backoff_jitter_stays_within_20_percent_and_never_exceeds_the_max() -> None:
    b = ExponentialBackoff(50, 2, 1000, 0.2, random.Random(7))
    for attempts in range(12):
        term = 50 * 2 ** min(attempts, 4.321928094887363)  # log2(1000 / 50)
        samples = [b.backoff_ms(attempts) for _ in range(300)]
        assert min(samples) >= int(0.8 * term)
        assert max(samples) <= min(1.2 * term, 1000)
        assert len(set(samples)) > 10  # jittered, not constant
    # at the cap, the jitter is cut at the max: some draws are exactly the max
    assert 1000 in [b.backoff_ms(20) for _ in range(300)]


def test_backoff_with_max_not_above_initial_is_the_initial_value() -> None:
    b = ExponentialBackoff(100, 2, 100, 0.2, random.Random(1))
    assert {b.backoff_ms(n) for n in range(10)} == {100}
    assert ExponentialBackoff(500, 2, 100, 0.2).backoff_ms(3) == 100  # initial is capped by max


# -- NodeConnection (ClusterConnectionStates) --------------------------------------------------


def _node() -> NodeConnection:
    return NodeConnection(
        1, "127.0.0.1", 9092,
        reconnect_backoff=ExponentialBackoff(50, 2, 400, 0.0),
        setup_timeout=ExponentialBackoff(10_000, 2, 30_000, 0.0),
    )


def test_a_new_node_may_connect_at_once() -> None:
    n = _node()
    assert n.state is ConnectionState.DISCONNECTED
    assert n.can_connect(0.0) and n.connection_delay(0.0) == 0


def test_failed_attempts_back_off_exponentially_from_the_failure() -> None:
    n = _node()
    now = 100.0
    delays = []
    for _ in range(6):
        assert n.can_connect(now)
        n.connecting(now)
        assert n.state is ConnectionState.CONNECTING and not n.can_connect(now + 99)
        now += 0.010  # the attempt takes 10 ms to fail
        n.disconnected(now, "refused")
        delays.append(n.connection_delay(now))
        assert not n.can_connect(now + delays[-1] - 0.001)
        now += delays[-1]
    assert delays == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.4, 0.4])
    assert [a.backoff_ms for a in n.attempts] == [50, 100, 200, 400, 400, 400]
    assert all(a.error == "refused" for a in n.attempts)
    # consecutive attempts that never connected also lengthen the setup timeout
    assert n.connection_setup_timeout_ms == 30_000 and n.failed_connect_attempts == 6


def test_ready_resets_the_backoff_and_a_lost_connection_backs_off_from_the_start() -> None:
    n = _node()
    for t in (0.0, 1.0, 2.0):
        n.connecting(t)
        n.disconnected(t, "refused")
    assert n.reconnect_backoff_ms == 200
    n.connecting(3.0)
    n.ready()
    assert n.state is ConnectionState.READY and n.failed_attempts == 0
    assert n.connection_delay(3.5) == 0
    assert n.connection_setup_timeout_ms == 10_000
    n.disconnected(10.0, "closed by the broker")
    assert n.state is ConnectionState.DISCONNECTED
    assert n.connection_delay(10.0) == pytest.approx(0.05)
    assert n.attempts[-1].started == 3.0 and n.attempts[-1].ended == 10.0


# -- InFlightRequests --------------------------------------------------------------------------


def _req(corr: int) -> InFlightRequest:
    return InFlightRequest(corr, 3, 12, future=None)


def test_responses_complete_the_oldest_request_in_order() -> None:
    q = InFlightRequests()
    ids = [q.next_correlation_id() for _ in range(5)]
    assert ids == [0, 1, 2, 3, 4]
    for i in ids:
        q.add(_req(i))
    assert [q.complete_next(i).correlation_id for i in (0, 1)] == [0, 1]
    assert len(q) == 3


def test_a_response_out_of_order_is_a_mismatch_and_leaves_the_queue_intact() -> None:
    q = InFlightRequests()
    for _ in range(3):
        q.add(_req(q.next_correlation_id()))
    with pytest.raises(CorrelationIdMismatchError, match=r"correlation id 1 but the oldest .* Metadata v12 \(correlation id 0\)"):
        q.complete_next(1)
    assert [r.correlation_id for r in q] == [0, 1, 2]
    assert [r.correlation_id for r in q.clear_all()] == [0, 1, 2]
    with pytest.raises(CorrelationIdMismatchError, match="no request in flight"):
        q.complete_next(0)


def test_correlation_ids_wrap_before_the_reserved_range() -> None:
    q = InFlightRequests(first_correlation_id=2**31 - 1 - 9)
    assert [q.next_correlation_id() for _ in range(3)] == [2**31 - 1 - 9, 0, 1]


# -- ResponseReceiver --------------------------------------------------------------------------


def _feed(r: ResponseReceiver, data: bytes, rng: random.Random, max_chunk: int) -> list[bytes | bytearray]:
    """Deliver `data` as a socket would, in chunks of random size into the receiver's buffers."""
    out: list[bytes | bytearray] = []
    pos = 0
    while pos < len(data):
        buf = r.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), rng.randint(1, max_chunk), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        out += r.buffer_updated(n)
    return out


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize(("max_chunk", "scratch"), [(1, 256), (7, 256), (4096, 64 * 1024), (1 << 20, 64 * 1024)])
def test_frames_are_cut_out_of_any_chunking(max_chunk: int, scratch: int) -> None:
    """Frame sizes around the scratch buffer's (empty, tiny, under half, over half, over all of
    it), delivered byte by byte up to a megabyte at a time."""
    rng = random.Random(max_chunk)
    sizes = [0, 1, 3, scratch // 4, scratch // 2 + 1, scratch - 3, scratch * 3]
    payloads = [bytes([i % 251]) * rng.choice(sizes) for i in range(60)]
    r = ResponseReceiver(max_frame_bytes=1 << 20, scratch_bytes=scratch)
    got = _feed(r, b"".join(map(_frame, payloads)), rng, max_chunk)
    assert r.error is None
    assert [bytes(f) for f in got] == payloads
    # frames larger than the scratch buffer were received into their own buffer, not copied out
    assert {type(f) for f, p in zip(got, payloads, strict=True) if len(p) > scratch} == {bytearray}


def test_a_size_prefix_out_of_bounds_is_a_sticky_error_after_the_good_frames() -> None:
    r = ResponseReceiver(max_frame_bytes=1000)
    data = _frame(b"ok") + (1001).to_bytes(4, "big") + b"x" * 10 + _frame(b"never")
    got = _feed(r, data, random.Random(0), 1 << 20)
    assert got == [b"ok"]
    assert r.error == "response size 1001 out of bounds (max 1000)"
    assert r.buffer_updated(0) == []
    r2 = ResponseReceiver(max_frame_bytes=1000)
    assert _feed(r2, b"\xff\xff\xff\xfe" + b"x" * 8, random.Random(0), 64) == []
    assert r2.error is not None and "-2" in r2.error


# -- decoding and versions ---------------------------------------------------------------------


def _unprefixed(chunks: list[bytes]) -> bytes:
    return b"".join(chunks)[4:]


def test_an_unsupported_version_answer_to_api_versions_is_read_in_the_v0_layout() -> None:
    answer = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(api_key=18, min_version=0, max_version=2)])
    frame = _unprefixed(encode_response_frame(5, 18, 0, answer))
    body = decode_response_frame(frame, 18, API_VERSIONS_VERSION)
    assert body.error_code == 35
    assert [(k.api_key, k.max_version) for k in body.api_keys] == [(18, 2)]
    ok = ApiVersionsResponse(error_code=0, api_keys=[ApiVersion(api_key=3, min_version=0, max_version=12)],
                             throttle_time_ms=7)
    body = decode_response_frame(_unprefixed(encode_response_frame(6, 18, 3, ok)), 18, 3)
    assert body.throttle_time_ms == 7 and body.api_keys[0].max_version == 12


def test_other_responses_decode_at_the_request_version() -> None:
    frame = _unprefixed(encode_response_frame(9, 3, 12, MetadataResponse(cluster_id="c", controller_id=4)))
    body = decode_response_frame(frame, 3, 12)
    assert (body.cluster_id, body.controller_id) == ("c", 4)


def test_the_usable_version_is_the_highest_both_sides_know() -> None:
    codec_max = REQUESTS[0].MAX_VERSION
    v = NodeApiVersions({0: (0, codec_max + 5), 3: (0, 9), 1: (4, 12)})
    assert v.latest_usable_version(0) == codec_max  # the broker is newer than our codecs
    assert v.latest_usable_version(3) == 9  # the broker is older
    assert v.check_version(1, 4) == 4
    with pytest.raises(UnsupportedApiVersionError, match="Fetch v3 is not supported"):
        v.check_version(1, 3)
    with pytest.raises(UnsupportedApiVersionError, match="does not support CreateTopics"):
        v.latest_usable_version(19)
    with pytest.raises(UnsupportedApiVersionError, match="no common version of Produce"):
        NodeApiVersions({0: (codec_max + 1, codec_max + 3)}).latest_usable_version(0)

"""protocol/fetch_lean.py against the generated codec: for Fetch v12 requests and responses of
every shape around the lean one (0-2 topics and partitions, forgotten topics, rack ids, cluster
ids, aborted transactions, diverging epochs, unknown tagged fields, values out of range, null
strings), framing's encoders write exactly the generated codec's bytes and its decoders read
exactly the generated codec's messages (or both refuse), and the lean shape does take the lean
path. Mutated and truncated frames decode as the generated codec decodes them, or fail as it
fails."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import fetch_lean
from protocol.framing import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request_frame,
)
from protocol.framing import encode_response_frame as framing_encode_response_frame
from protocol.messages import FetchRequest, FetchResponse, RequestHeader, ResponseHeader
from protocol.messages import fetch_request as fq
from protocol.messages import fetch_response as fr
from protocol.primitives import DecodeError, EncodeError

V = 12
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([-1, 0, 1, 2**31 - 1]))
INT64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-1, 0, 127, 128]))
OUT_OF_RANGE = st.sampled_from([2**31, -(2**31) - 1, 2**63])
NAMES = st.one_of(st.sampled_from(["t", "hops", "__consumer_offsets", "x" * 126, "x" * 127, "y" * 200, "é"]),
                  st.text(max_size=12))
UNKNOWN_TAGS = st.one_of(st.none(), st.just([]), st.just([(7, b"\x01\x02")]))


def maybe_bad(ints: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    return st.one_of(ints, ints, ints, ints, ints, ints, ints, ints, ints, OUT_OF_RANGE)


@st.composite
def fetch_partitions(draw: Any) -> fq.FetchPartition:
    return fq.FetchPartition(
        partition=draw(maybe_bad(INT32)), current_leader_epoch=draw(INT32), fetch_offset=draw(maybe_bad(INT64)),
        last_fetched_epoch=draw(INT32), log_start_offset=draw(INT64), partition_max_bytes=draw(INT32),
        _unknown_tagged_fields=draw(st.sampled_from([None, None, None, [], [(3, b"z")]])))


@st.composite
def fetch_requests(draw: Any) -> FetchRequest:
    if draw(st.booleans()):  # the lean shape, mostly: one topic, one partition
        topics = [fq.FetchTopic(topic=draw(NAMES), partitions=[draw(fetch_partitions())])]
    else:
        topics = draw(st.lists(st.builds(
            lambda name, parts, tags: fq.FetchTopic(topic=name, partitions=parts, _unknown_tagged_fields=tags),
            NAMES, st.lists(fetch_partitions(), max_size=2), st.sampled_from([None, None, None, [(1, b"")]])),
            max_size=2))
    forgotten = draw(st.sampled_from([[], [], [], [fq.ForgottenTopic(topic="f", partitions=[1, 2])]]))
    return FetchRequest(
        replica_id=draw(st.sampled_from([-1, 1, 2, 3])), max_wait_ms=draw(INT32), min_bytes=draw(INT32),
        max_bytes=draw(INT32), isolation_level=draw(st.sampled_from([0, 1, 0, 300])),
        session_id=draw(INT32), session_epoch=draw(INT32), topics=topics, forgotten_topics_data=forgotten,
        rack_id=draw(st.one_of(st.just(""), st.just(""), NAMES)),
        cluster_id=draw(st.sampled_from([None, None, None, "c"])),
        _unknown_tagged_fields=draw(st.sampled_from([None, None, None, [(9, b"q")]])))


def generic_request_frame(corr: int, client_id: str | None, body: FetchRequest) -> bytes:
    parts: list[bytes] = []
    RequestHeader(request_api_key=1, request_api_version=V, correlation_id=corr, client_id=client_id).encode_into(
        2, parts.append)
    body.encode_into(V, parts.append)
    data = b"".join(parts)
    return struct.pack(">i", len(data)) + data


def lean_shaped(req: FetchRequest) -> bool:
    ok = (req.cluster_id is None and not req._unknown_tagged_fields and not req.forgotten_topics_data
          and len(req.topics) <= 1 and -(2**31) <= req.isolation_level < 128)
    for t in req.topics:
        ok = ok and not t._unknown_tagged_fields and len(t.partitions) == 1
        for p in t.partitions:
            ok = ok and not p._unknown_tagged_fields and -(2**31) <= p.partition < 2**31 and p.fetch_offset < 2**63
    return ok


@SETTINGS
@given(fetch_requests(), st.one_of(st.none(), NAMES), INT32)
def test_request_bytes_and_messages_are_the_generated_codecs(req: FetchRequest, client_id: str | None,
                                                             corr: int) -> None:
    try:
        expected = generic_request_frame(corr, client_id, req)
    except EncodeError:
        with pytest.raises(EncodeError):
            encode_request_frame(1, V, corr, client_id, req)
        return
    assert encode_request_frame(1, V, corr, client_id, req) == expected
    if lean_shaped(req) and (client_id is None or len(client_id.encode()) <= 0x7FFF):
        assert fetch_lean.encode_request_frame(corr, client_id, req) == expected  # the lean path, not a fallback
    body = memoryview(expected)[4:]
    header, pos = decode_request_header(body)
    assert (header, pos) == RequestHeader.decode_from(body, 0, 2)
    if client_id is None or len(client_id.encode()) <= 0x7FFF:
        assert fetch_lean.decode_request_header(body) == (header, pos)
    decoded = decode_request_body(header, body, pos)
    assert decoded == FetchRequest.decode(body, V, pos)
    if lean_shaped(req) and all(len(t.topic.encode()) < 127 for t in req.topics) and len(req.rack_id.encode()) < 127:
        assert fetch_lean.decode_request(body, pos) == decoded


@st.composite
def partition_data(draw: Any) -> fr.PartitionData:
    extra: dict[str, Any] = {}
    which = draw(st.sampled_from(["", "", "", "", "diverging", "leader", "snapshot", "default-diverging"]))
    if which == "diverging":
        extra["diverging_epoch"] = fr.EpochEndOffset(epoch=draw(INT32), end_offset=draw(INT64))
    elif which == "default-diverging":
        extra["diverging_epoch"] = fr.EpochEndOffset()
    elif which == "leader":
        extra["current_leader"] = fr.LeaderIdAndEpoch(leader_id=3, leader_epoch=4)
    elif which == "snapshot":
        extra["snapshot_id"] = fr.SnapshotId(end_offset=5, epoch=1)
    records = draw(st.one_of(st.none(), st.binary(max_size=300), st.binary(max_size=300).map(bytearray),
                             st.binary(max_size=300).map(memoryview)))
    return fr.PartitionData(
        partition_index=draw(maybe_bad(INT32)), error_code=draw(st.sampled_from([0, 1, 6, 32767, 40000])),
        high_watermark=draw(INT64), last_stable_offset=draw(INT64), log_start_offset=draw(maybe_bad(INT64)),
        aborted_transactions=draw(st.sampled_from([None, None, [], [fr.AbortedTransaction(producer_id=7,
                                                                                          first_offset=9)]])),
        preferred_read_replica=draw(INT32), records=records,
        _unknown_tagged_fields=draw(st.sampled_from([None, None, None, [(8, b"u")]])), **extra)


@st.composite
def fetch_responses(draw: Any) -> FetchResponse:
    if draw(st.booleans()):  # the lean shape, mostly: one topic, one partition
        topics = [fr.FetchableTopicResponse(topic=draw(NAMES), partitions=[draw(partition_data())])]
    else:
        topics = draw(st.lists(st.builds(
            lambda name, parts, tags: fr.FetchableTopicResponse(topic=name, partitions=parts,
                                                                _unknown_tagged_fields=tags),
            NAMES, st.lists(partition_data(), max_size=2), st.sampled_from([None, None, None, [(1, b"")]])),
            max_size=2))
    return FetchResponse(throttle_time_ms=draw(INT32), error_code=draw(st.sampled_from([0, 0, 0, 70, 71])),
                         session_id=draw(INT32), responses=topics,
                         _unknown_tagged_fields=draw(st.sampled_from([None, None, None, [(9, b"q")]])))


def generic_response_chunks(corr: int, body: FetchResponse) -> list[Any]:
    parts: list[Any] = []
    ResponseHeader(correlation_id=corr).encode_into(1, parts.append)
    body.encode_into(V, parts.append)
    return [struct.pack(">i", sum(map(len, parts))), *parts]


def response_lean_shaped(resp: FetchResponse) -> bool:
    if resp._unknown_tagged_fields or len(resp.responses) > 1:
        return False
    for t in resp.responses:
        if t._unknown_tagged_fields or len(t.partitions) != 1:
            return False
        d = t.partitions[0]
        if (d._unknown_tagged_fields or d.aborted_transactions or d.diverging_epoch != fr.EpochEndOffset()
                or d.current_leader != fr.LeaderIdAndEpoch() or d.snapshot_id != fr.SnapshotId()
                or not -(2**31) <= d.partition_index < 2**31 or not d.error_code < 2**15
                or d.log_start_offset >= 2**63):
            return False
    return True


def joined(chunks: list[Any]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


@SETTINGS
@given(fetch_responses(), INT32)
def test_response_bytes_and_messages_are_the_generated_codecs(resp: FetchResponse, corr: int) -> None:
    try:
        expected = joined(generic_response_chunks(corr, resp))
    except EncodeError:
        with pytest.raises(EncodeError):
            framing_encode_response_frame(corr, 1, V, resp)
        return
    chunks = framing_encode_response_frame(corr, 1, V, resp)
    assert joined(chunks) == expected
    assert len(chunks[0]) == 4  # the size prefix alone, as network.py reads it
    if response_lean_shaped(resp):
        lean = fetch_lean.encode_response_frame(corr, resp)
        assert lean is not None and joined(lean) == expected
    frame = memoryview(expected)[4:]
    corr_read, decoded = decode_response(frame, 1, V)
    g_header, g_pos = ResponseHeader.decode_from(frame, 0, 1)
    assert corr_read == g_header.correlation_id == corr
    assert decoded == FetchResponse.decode(frame, V, g_pos)
    if response_lean_shaped(resp) and all(len(t.topic.encode()) < 127 for t in resp.responses):
        assert fetch_lean.decode_response(frame, 5) == decoded


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except DecodeError:
        return ("error", None)


REQUEST_HEADER = RequestHeader(request_api_key=1, request_api_version=V, correlation_id=11,
                               client_id="broker-2-fetcher-0")
REQUEST_BODY_AT = 8 + 2 + len("broker-2-fetcher-0") + 1


def lean_or_generic_request(mv: memoryview) -> Any:
    return decode_request_body(REQUEST_HEADER, mv, REQUEST_BODY_AT)


def generic_header(mv: memoryview) -> Any:
    return RequestHeader.decode_from(mv, 0, 2)


def generic_request(mv: memoryview) -> Any:
    return FetchRequest.decode(mv, V, REQUEST_BODY_AT)


def lean_or_generic_response(mv: memoryview) -> Any:
    return decode_response(mv, 1, V)


def generic_response(mv: memoryview) -> Any:
    h, p = ResponseHeader.decode_from(mv, 0, 1)
    return h.correlation_id, FetchResponse.decode(mv, V, p)


LEAN_REQUEST = generic_request_frame(11, "broker-2-fetcher-0", FetchRequest(
    replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20, session_id=77, session_epoch=9,
    topics=[fq.FetchTopic(topic="hops", partitions=[fq.FetchPartition(
        partition=0, current_leader_epoch=3, fetch_offset=1000, last_fetched_epoch=3, log_start_offset=0,
        partition_max_bytes=1 << 20)])], rack_id=""))
LEAN_RESPONSE = joined(generic_response_chunks(11, FetchResponse(session_id=77, responses=[
    fr.FetchableTopicResponse(topic="hops", partitions=[fr.PartitionData(
        partition_index=0, high_watermark=1001, last_stable_offset=1001, log_start_offset=0,
        aborted_transactions=None, records=bytes(range(200)))])])))


@SETTINGS
@given(st.data())
def test_mutated_frames_decode_as_the_generated_codec_decodes_them(data: Any) -> None:
    for frame, is_request in ((LEAN_REQUEST, True), (LEAN_RESPONSE, False)):
        b = bytearray(frame[4:])
        for _ in range(data.draw(st.integers(1, 3))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.sampled_from([0, 1, 2, 3, 0x7F, 0x80, 0xFF]))
        b = b[:data.draw(st.integers(len(b) - 40, len(b)))] if data.draw(st.booleans()) else b
        mv = memoryview(bytes(b))
        if is_request:
            assert outcome(lean_or_generic_request, mv) == outcome(generic_request, mv)
            if bytes(mv[:4]) == b"\x00\x01\x00\x0c":  # still Fetch v12: its header too
                assert outcome(decode_request_header, mv) == outcome(generic_header, mv)
        else:
            assert outcome(lean_or_generic_response, mv) == outcome(generic_response, mv)


def test_the_steady_state_frames_take_the_lean_path() -> None:
    """What the replication round sends: the lean functions answer (no fallback), in 4 chunks
    for a response with records instead of the generated codec's 16."""
    body = memoryview(LEAN_REQUEST)[4:]
    assert fetch_lean.decode_request(body, decode_request_header(body)[1]) is not None
    resp = fetch_lean.decode_response(memoryview(LEAN_RESPONSE)[4:], 5)
    assert resp is not None and bytes(resp.responses[0].partitions[0].records) == bytes(range(200))
    chunks = fetch_lean.encode_response_frame(11, resp)
    assert chunks is not None and len(chunks) == 4 and joined(chunks) == LEAN_RESPONSE

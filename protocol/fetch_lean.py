"""Lean codecs for Fetch v12 with at most one topic and one partition (issue #20 §5).

Why: a fetch session's steady state -- a follower fetching one partition from its leader, a
consumer fetching one partition -- exchanges small Fetch v12 frames, each request naming at most
the one partition whose position moved and each response at most the one partition with news.
On the acks=all round's critical path every hop encodes or decodes one of them, and the generated
codec spends most of its time in per-field calls and per-field chunks (16 chunks for a one-record
response). These functions handle exactly that shape in a few struct calls and return None for
anything else (more topics or partitions, forgotten topics, tagged fields, an aborted-transaction
list, values out of range, a malformed frame), so the caller falls back to the generated codec,
which stays the reference: the bytes written and the messages read are the generated codec's,
field for field (tests/unit/protocol/test_fetch_lean.py checks both ways with hypothesis).

Sans-I/O, as the rest of protocol/.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from protocol.messages.request_header import RequestHeader
from protocol.primitives import DECODE_ERRORS, ZERO_UUID, read_uvarint, uvarint

FETCH_KEY = 1
LEAN_VERSION = 12  # the first flexible version, the last with topic names (13+ carry topic ids)

_new = object.__new__
_HEADER = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_HEADER_V2 = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_SESSION = struct.Struct(">iiiibii")  # replica id .. session epoch
_PARTITION = struct.Struct(">iiqiqi")  # partition .. partition max bytes
_SIZE_CORR = struct.Struct(">ii")  # size, correlation id
_RESPONSE = struct.Struct(">ihi")  # throttle time, error code, session id
_PARTITION_DATA = struct.Struct(">ihqqq")  # partition .. log start offset
_PREFERRED = _CORR = _SIZE = struct.Struct(">i")
_ENCODE_ERRORS = (struct.error, UnicodeEncodeError, OverflowError, TypeError, AttributeError)
_NO_TAGS = b"\x00"
# the PartitionData tagged fields' defaults (not sent): a response built with these very instances
# (broker/apis/fetch.py) is checked by identity; they are only ever compared, never changed
NO_DIVERGING_EPOCH = EpochEndOffset()
NO_CURRENT_LEADER = LeaderIdAndEpoch()
NO_SNAPSHOT_ID = SnapshotId()


def encode_request_frame(correlation_id: int, client_id: str | None, body: Any) -> bytes | None:
    """The size-prefixed frame of a Fetch v12 request (request header v2), or None."""
    if type(body) is not FetchRequest or body.cluster_id is not None or body._unknown_tagged_fields:
        return None
    topics = body.topics
    if body.forgotten_topics_data or len(topics) > 1:
        return None
    try:
        if client_id is None:
            client = b"\xff\xff"
        else:
            raw = client_id.encode()
            if len(raw) > 0x7FFF:
                return None
            client = len(raw).to_bytes(2, "big") + raw
        rack = body.rack_id.encode()
        session = _SESSION.pack(body.replica_id, body.max_wait_ms, body.min_bytes, body.max_bytes,
                                body.isolation_level, body.session_id, body.session_epoch)
        if topics:
            t = topics[0]
            if t._unknown_tagged_fields or len(t.partitions) != 1:
                return None
            p = t.partitions[0]
            if p._unknown_tagged_fields:
                return None
            name = t.topic.encode()
            topic = b"".join((b"\x02", uvarint(len(name) + 1), name, b"\x02", _PARTITION.pack(
                p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset,
                p.partition_max_bytes), b"\x00\x00"))
        else:
            topic = b"\x01"
        tail = b"".join((topic, b"\x01", uvarint(len(rack) + 1), rack, _NO_TAGS))
        size = 8 + len(client) + 1 + 25 + len(tail)
        return b"".join((_HEADER.pack(size, FETCH_KEY, LEAN_VERSION, correlation_id), client, _NO_TAGS, session, tail))
    except _ENCODE_ERRORS:
        return None


def _one_partition_topic(b: memoryview, p: int) -> tuple[str, int] | None:
    """A topic's name (a compact string of 0-126 bytes: a one-byte length) at `b[p]` followed by
    a partitions array of one element: (the name, where that partition starts), or None."""
    size = b[p]
    if not 0 < size < 0x80:
        return None
    p += 1
    end = p + size - 1
    if end > len(b) or b[end] != 2:
        return None
    return str(b[p:end], "utf-8"), end + 1


def decode_request_header(b: memoryview) -> tuple[RequestHeader, int] | None:
    """The request header v2 of a Fetch v12 frame (size prefix removed) and where its body
    starts, or None."""
    try:
        o = _new(RequestHeader)
        o.request_api_key, o.request_api_version, o.correlation_id, n = _HEADER_V2.unpack_from(b, 0)
        if n < 0:
            if n != -1:
                return None
            o.client_id = None
            p = 10
        else:
            p = 10 + n
            if p > len(b):
                return None
            o.client_id = str(b[10:p], "utf-8")
        if b[p]:  # the header's tagged fields
            return None
        o._unknown_tagged_fields = None
        return o, p + 1
    except DECODE_ERRORS:
        return None


def decode_request(b: memoryview, p: int) -> FetchRequest | None:
    """The Fetch v12 request body at `b[p:]`, or None."""
    try:
        o = _new(FetchRequest)
        (o.replica_id, o.max_wait_ms, o.min_bytes, o.max_bytes, o.isolation_level, o.session_id,
         o.session_epoch) = _SESSION.unpack_from(b, p)
        p += 25
        n = b[p]
        if n == 2:
            named = _one_partition_topic(b, p + 1)
            if named is None:
                return None
            t = _new(FetchTopic)
            t.topic, p = named
            t.topic_id = ZERO_UUID
            q = _new(FetchPartition)
            (q.partition, q.current_leader_epoch, q.fetch_offset, q.last_fetched_epoch, q.log_start_offset,
             q.partition_max_bytes) = _PARTITION.unpack_from(b, p)
            p += 32
            if b[p] or b[p + 1]:  # the partition's and the topic's tagged fields
                return None
            p += 2
            q.replica_directory_id = ZERO_UUID
            q._unknown_tagged_fields = None
            t.partitions = [q]
            t._unknown_tagged_fields = None
            o.topics = [t]
        elif n == 1:
            p += 1
            o.topics = []
        else:
            return None
        if b[p] != 1:  # forgotten topics
            return None
        size = b[p + 1]
        if not 0 < size < 0x80:
            return None
        p += 2
        end = p + size - 1
        if end >= len(b) or b[end]:  # the request's tagged fields
            return None
        o.rack_id = str(b[p:end], "utf-8") if size > 1 else ""
        o.forgotten_topics_data = []
        o.cluster_id = None
        o.replica_state = ReplicaState()
        o._unknown_tagged_fields = None
        return o
    except DECODE_ERRORS:
        return None


def encode_response_frame(correlation_id: int, body: Any) -> list[Any] | None:
    """The chunks of a Fetch v12 response frame (response header v1) as
    framing.encode_response_frame returns them -- the size prefix alone first, the records
    (bytes or a file region) a chunk of their own -- or None."""
    if type(body) is not FetchResponse or body._unknown_tagged_fields:
        return None
    responses = body.responses
    try:
        head = _RESPONSE.pack(body.throttle_time_ms, body.error_code, body.session_id)
        if not responses:
            data = b"".join((_CORR.pack(correlation_id), _NO_TAGS, head, b"\x01\x00"))
            return [_SIZE.pack(len(data)), data]
        if len(responses) > 1:
            return None
        t = responses[0]
        if t._unknown_tagged_fields or len(t.partitions) != 1:
            return None
        d = t.partitions[0]
        if d._unknown_tagged_fields or not (
                (d.diverging_epoch is NO_DIVERGING_EPOCH or d.diverging_epoch == NO_DIVERGING_EPOCH)
                and (d.current_leader is NO_CURRENT_LEADER or d.current_leader == NO_CURRENT_LEADER)
                and (d.snapshot_id is NO_SNAPSHOT_ID or d.snapshot_id == NO_SNAPSHOT_ID)):
            return None
        aborted = d.aborted_transactions
        if aborted is None:
            aborted_bytes = b"\x00"
        elif not aborted:
            aborted_bytes = b"\x01"
        else:
            return None
        name = t.topic.encode()
        records = d.records
        partition = _PARTITION_DATA.pack(d.partition_index, d.error_code, d.high_watermark, d.last_stable_offset,
                                         d.log_start_offset)
        preferred = _PREFERRED.pack(d.preferred_read_replica)
        if records is None:
            data = b"".join((_CORR.pack(correlation_id), _NO_TAGS, head, b"\x02", uvarint(len(name) + 1), name,
                             b"\x02", partition, aborted_bytes, preferred, b"\x00\x00\x00\x00"))
            return [_SIZE.pack(len(data)), data]
        n = len(records)
        data = b"".join((_CORR.pack(correlation_id), _NO_TAGS, head, b"\x02", uvarint(len(name) + 1), name,
                         b"\x02", partition, aborted_bytes, preferred, uvarint(n + 1)))
        return [_SIZE.pack(len(data) + n + 3), data, records, b"\x00\x00\x00"]
    except _ENCODE_ERRORS:
        return None



def decode_response(b: memoryview, p: int) -> FetchResponse | None:
    """The Fetch v12 response body at `b[p:]` (after the response header), or None."""
    try:
        o = _new(FetchResponse)
        o.throttle_time_ms, o.error_code, o.session_id = _RESPONSE.unpack_from(b, p)
        p += 10
        n = b[p]
        if n == 1:
            if b[p + 1]:
                return None
            o.responses = []
        elif n == 2:
            named = _one_partition_topic(b, p + 1)
            if named is None:
                return None
            t = _new(FetchableTopicResponse)
            t.topic, p = named
            t.topic_id = ZERO_UUID
            d = _new(PartitionData)
            (d.partition_index, d.error_code, d.high_watermark, d.last_stable_offset,
             d.log_start_offset) = _PARTITION_DATA.unpack_from(b, p)
            p += 30
            aborted = b[p]
            if aborted == 0:
                d.aborted_transactions = None
            elif aborted == 1:
                d.aborted_transactions = []
            else:
                return None
            d.preferred_read_replica, = _PREFERRED.unpack_from(b, p + 1)
            size, p = read_uvarint(b, p + 5)
            if size == 0:
                d.records = None
            else:
                end = p + size - 1
                if end > len(b):
                    return None
                d.records = b[p:end]
                p = end
            if b[p] or b[p + 1] or b[p + 2]:  # the partition's, the topic's, the response's tags
                return None
            d.diverging_epoch = EpochEndOffset()
            d.current_leader = LeaderIdAndEpoch()
            d.snapshot_id = SnapshotId()
            d._unknown_tagged_fields = None
            t.partitions = [d]
            t._unknown_tagged_fields = None
            o.responses = [t]
        else:
            return None
        o.node_endpoints = []
        o._unknown_tagged_fields = None
        return o
    except DECODE_ERRORS:
        return None

"""ListOffsets (key 2), versions 1-7.

Timestamps: -2 earliest (log start offset), -1 latest (high watermark; last stable offset for
read_committed, v2+), -3 (v7, KIP-734) the offset of the record with the largest timestamp;
otherwise the first offset whose timestamp is >= the target, or offset -1 / timestamp -1 when
none is. Answers carry the leader epoch (v4+) of the batch found. A current_leader_epoch (v4+)
older than ours gets FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH -- checked before the
leadership, as Kafka's, so a consumer with a stale epoch asking a follower is fenced rather than
told NOT_LEADER_OR_FOLLOWER. Only a leader answers, except a debugging client's (replica id -2)
question, which any replica answers from its own log. Consumers (replica id -1) cannot see past
the high watermark. As Kafka: a partition named twice gets INVALID_REQUEST
(every time), a negative timestamp that is no sentinel of the request's version
UNSUPPORTED_VERSION.

KIP-207 (Kafka's Partition.fetchOffsetForTimestamp): a new leader's high watermark is the one it
last heard as a follower, behind the previous leader's until its ISR fetches from it, so a
consumer asking for "latest" right after a leader change would see the end go back (Spark's
sources take that for lost data). While the high watermark is below the offset the leader's epoch
started at, a consumer's "latest" gets OFFSET_NOT_AVAILABLE (v5+; LEADER_NOT_AVAILABLE before),
both retriable, and so does a time lookup that finds nothing below the high watermark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)

if TYPE_CHECKING:
    from storage.log import Log

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
DEBUGGING_REPLICA_ID = -2  # ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read a follower's offsets


def check_leader_epoch(current: int, ours: int) -> None:
    if current == -1:
        return
    if current < ours:
        raise KafkaProtocolError(ErrorCode.FENCED_LEADER_EPOCH)
    if current > ours:
        raise KafkaProtocolError(ErrorCode.UNKNOWN_LEADER_EPOCH)


def _high_watermark_lags_epoch_start(log_: Log, leader_epoch: int) -> bool:
    """Whether the leader's high watermark is below the start offset of its epoch (its log end
    offset when it became leader, in the leader epoch cache)."""
    cache = log_.leader_epoch_cache
    entry = cache.epoch_entry(leader_epoch) if cache is not None else None
    return entry is not None and entry.start_offset > log_.high_watermark


@api(2, 1, 7)
async def handle(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    rm = ctx.server.replica_manager
    seen: set[tuple[str, int]] = set()
    duplicates = {
        (t.name, p.partition_index) for t in req.topics for p in t.partitions
        if (t.name, p.partition_index) in seen or seen.add((t.name, p.partition_index))
    }
    sentinels = (EARLIEST, LATEST, MAX_TIMESTAMP) if ctx.version >= 7 else (EARLIEST, LATEST)
    described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            resp = ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1)
            try:
                if t.name not in described:  # KafkaApis: DESCRIBE on the topic
                    raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if (t.name, p.partition_index) in duplicates:
                    raise KafkaProtocolError(ErrorCode.INVALID_REQUEST)
                if p.timestamp < 0 and p.timestamp not in sentinels:
                    # -3 before v7, -4 (KIP-405) and -5 (KIP-1005) at any version we serve
                    raise KafkaProtocolError(ErrorCode.UNSUPPORTED_VERSION)
                # Kafka's Partition.getLocalLog: the epoch, then the leadership (a debugging
                # client, replica id -2, may ask a follower)
                part = rm.get_partition(t.name, p.partition_index)
                check_leader_epoch(p.current_leader_epoch, part.leader_epoch)
                if req.replica_id != DEBUGGING_REPLICA_ID and not part.is_leader:
                    raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                log_ = part.log
                ts = p.timestamp
                lagging = req.replica_id == -1 and _high_watermark_lags_epoch_start(log_, part.leader_epoch)
                not_available = ErrorCode.OFFSET_NOT_AVAILABLE if ctx.version >= 5 else ErrorCode.LEADER_NOT_AVAILABLE
                if ts == EARLIEST:
                    resp.offset = log_.log_start_offset
                    resp.leader_epoch = log_.epoch_for_offset(resp.offset)
                elif ts == LATEST:
                    if lagging:
                        raise KafkaProtocolError(not_available)
                    if req.replica_id != -1:  # a replica or a debugging tool: no isolation, the log end (Kafka's)
                        resp.offset = log_.log_end_offset
                    else:
                        resp.offset = log_.last_stable_offset if req.isolation_level == 1 else log_.high_watermark
                    resp.leader_epoch = part.leader_epoch
                else:
                    found = log_.offset_for_timestamp(ts)
                    if found is not None:
                        offset, timestamp, epoch = found
                        if req.replica_id == -1 and offset >= log_.high_watermark:
                            found = None
                        else:
                            resp.offset, resp.timestamp, resp.leader_epoch = offset, timestamp, epoch
                    if found is None and lagging:
                        raise KafkaProtocolError(not_available)
            except KafkaProtocolError as e:
                resp.error_code = e.code
            parts.append(resp)
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

"""OffsetForLeaderEpoch (key 23), versions 2-4.

For each partition: the largest epoch <= the requested one that this leader knows, and the
offset where the next epoch starts (or the log end offset for the latest epoch) — what a
follower or a consumer validating its position (KIP-320) truncates to. UNDEFINED_EPOCH (-1, -1)
when the requested epoch is older than everything we have. current_leader_epoch fences stale and
future callers (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), checked before the leadership as
Kafka's; only a leader answers (NOT_LEADER_OR_FOLLOWER from a follower, also to a consumer
fetching from it under KIP-392). v3+ carries the replica id.
"""

from __future__ import annotations

from broker.apis.list_offsets import check_leader_epoch
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)


@api(23, 2, 4)
async def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    rm = ctx.server.replica_manager
    # KafkaApis (KIP-320): CLUSTER_ACTION on the cluster (followers), else DESCRIBE on each topic
    names = [t.topic for t in req.topics]
    described = (set(names) if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
                 else ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out = EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            try:
                if t.topic not in described:
                    raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                part = rm.get_partition(t.topic, p.partition)
                check_leader_epoch(p.current_leader_epoch, part.leader_epoch)  # before the leadership, as Kafka's
                if not part.is_leader:
                    raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                log_ = part.log
                out.leader_epoch, out.end_offset = log_.leader_epoch_cache.end_offset_for(
                    p.leader_epoch, log_.log_end_offset
                )
            except KafkaProtocolError as e:
                out.error_code = e.code
            parts.append(out)
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

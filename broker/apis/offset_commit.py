"""OffsetCommit (key 8), versions 2-9 (see NOTES.md).

* A group member commits with its member id and generation: UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION, or REBALANCE_IN_PROGRESS while the group awaits its assignment
  (CompletingRebalance) are answered for every partition. Commits during PreparingRebalance are
  accepted, as Kafka does.
* generation -1 with an empty member id is a "simple" commit (assign() consumers, admin tools):
  allowed while the group has no members; a group that does not exist is created Empty.
* Offsets are appended to `__consumer_offsets` with acks=all before they are visible to
  OffsetFetch; partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; metadata longer
  than `offset.metadata.max.bytes` (4096) gets OFFSET_METADATA_TOO_LARGE.
* v2-4 retention_time_ms is ignored (offsets do not expire yet); v6+ leader epoch is stored;
  v7+ group_instance_id: a static instance's old member id gets FENCED_INSTANCE_ID.
* Authorization (KafkaApis.handleOffsetCommitRequest): READ on the GROUP (else every partition
  GROUP_AUTHORIZATION_FAILED) and on each TOPIC (else TOPIC_AUTHORIZATION_FAILED for its
  partitions).
"""

from __future__ import annotations

import time
from typing import Any

from broker.apis.registry import api
from broker.context import RequestContext
from broker.group.metadata import OffsetAndMetadata
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)


def requested_offsets(
    ctx: RequestContext, topics: list[Any], with_leader_epoch: bool
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetAndMetadata]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions: (TOPIC_AUTHORIZATION_FAILED for those
    of a topic the caller may not READ, UNKNOWN_TOPIC_OR_PARTITION for those this broker's
    metadata does not know, the offsets of the others, committed now). The two
    requests' partitions have the same fields; `with_leader_epoch` for the versions that have
    committed_leader_epoch."""
    now = int(time.time() * 1000)
    known = ctx.server.metadata_cache.topics
    readable = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in topics))
    errors: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for t in topics:
        topic = known.get(t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset,
                    p.committed_leader_epoch if with_leader_epoch else -1,
                    p.committed_metadata or "",
                    now,
                )
    return errors, offsets


@api(8, 2, 9)
async def handle(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        errors = {(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                  for t in req.topics for p in t.partitions}
        offsets = {}
    else:
        errors, offsets = requested_offsets(ctx, req.topics, ctx.version >= 6)
    if offsets:
        errors.update(
            await ctx.server.group_coordinator.handle_commit_offsets(
                req.group_id, req.member_id, req.generation_id_or_member_epoch, offsets,
                group_instance_id=req.group_instance_id if ctx.version >= 7 else None,
            )
        )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )

"""OffsetDelete (key 47), version 0.

Deletes committed offsets of an empty group, or of a consumer group for topics none of its
members subscribes to (else GROUP_SUBSCRIBED_TO_TOPIC per partition). Unknown group:
GROUP_ID_NOT_FOUND. The offsets are tombstoned in `__consumer_offsets`. Needs DELETE on the
GROUP (else GROUP_AUTHORIZATION_FAILED) and READ on each TOPIC (else TOPIC_AUTHORIZATION_FAILED
for its partitions), as KafkaApis.handleOffsetDeleteRequest.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)


@api(47, 0, 0)
async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0)
    readable = ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name in readable]
    code, results = await ctx.server.group_coordinator.handle_delete_offsets(req.group_id, tps)
    results.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    for t in req.topics if t.name not in readable for p in t.partitions})
    if code:
        return OffsetDeleteResponse(error_code=code, throttle_time_ms=0)
    return OffsetDeleteResponse(
        error_code=0,
        throttle_time_ms=0,
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=results[(t.name, p.partition_index)])
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )

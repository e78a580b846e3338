"""SyncGroup (key 14), versions 0-5.

The leader sends every member's assignment; the coordinator stores the group (a GroupMetadata
record in `__consumer_offsets`) and answers each member with its own. Members that sync before
the leader wait. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the
group went back to PreparingRebalance), INCONSISTENT_GROUP_PROTOCOL (v5 protocol type/name that
do not match the group's), FENCED_INSTANCE_ID (v3+: the static instance now has another member
id), NOT_COORDINATOR; GROUP_AUTHORIZATION_FAILED without READ on the GROUP.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import SyncGroupRequest, SyncGroupResponse


@api(14, 0, 5)
async def handle(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v5 = ctx.version >= 5
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 protocol_type=None, protocol_name=None, assignment=b"")
    result = await ctx.server.group_coordinator.handle_sync_group(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        protocol_type=req.protocol_type if v5 else None,
        protocol_name=req.protocol_name if v5 else None,
        assignments={a.member_id: a.assignment for a in req.assignments},
        group_instance_id=req.group_instance_id if ctx.version >= 3 else None,
    )
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )

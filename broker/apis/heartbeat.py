"""Heartbeat (key 12), versions 0-4.

Resets the member's session deadline. Errors: UNKNOWN_MEMBER_ID (not a member, or the group is
empty), ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while the group prepares a rebalance (the
member must rejoin), FENCED_INSTANCE_ID (v3+ static member replaced by a newer instance),
NOT_COORDINATOR, GROUP_AUTHORIZATION_FAILED without READ on the GROUP.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import HeartbeatRequest, HeartbeatResponse


@api(12, 0, 4)
async def handle(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    instance = req.group_instance_id if ctx.version >= 3 else None
    code = ctx.server.group_coordinator.handle_heartbeat(req.group_id, req.member_id, req.generation_id, instance)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)

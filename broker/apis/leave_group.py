"""LeaveGroup (key 13), versions 0-5.

v0-2 name one member (`member_id`); v3+ a batch (`members`, with per-member errors). Each
leaving member is removed and the group rebalances (or completes a rebalance in progress).
An unknown member gets UNKNOWN_MEMBER_ID (v0-2: as the top-level error). From v3 a member may be
named by group_instance_id alone (empty member id: administrative removal of a static member);
a stale member id of a static instance gets FENCED_INSTANCE_ID. Needs READ on the GROUP (else
GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.leave_group_response import MemberResponse


@api(13, 0, 5)
async def handle(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    gc = ctx.server.group_coordinator
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if ctx.version < 3:
        code, results = gc.handle_leave_group(req.group_id, [(req.member_id, None)])
        if not code and results:
            code = results[0][2]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code)
    code, results = gc.handle_leave_group(req.group_id, [(m.member_id, m.group_instance_id) for m in req.members])
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        members=[MemberResponse(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results],
    )

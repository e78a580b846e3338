"""JoinGroup (key 11), versions 0-9: see broker/group/coordinator.py for the protocol.

* Needs READ on the GROUP (else GROUP_AUTHORIZATION_FAILED), as KafkaApis.handleJoinGroupRequest.
* v0 has no rebalance timeout: the session timeout is used for both.
* v4+: a member joining with an empty id gets MEMBER_ID_REQUIRED and its new id (KIP-394).
* v5+ group_instance_id: static membership (KIP-345). A known instance rejoining with an empty
  member id takes over its old id (FENCED_INSTANCE_ID for the old one), without a rebalance in a
  Stable group; static members get no MEMBER_ID_REQUIRED round trip.
* v7+ protocol_type in the response; protocol_name is nullable from v7 (null on errors);
  v8 reason is logged only; v9 skip_assignment is always false.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import JoinGroupRequest, JoinGroupResponse
from protocol.messages.join_group_response import JoinGroupResponseMember


@api(11, 0, 9)
async def handle(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return JoinGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 generation_id=-1, protocol_type=None, protocol_name=None if v >= 7 else "",
                                 leader="", skip_assignment=False, member_id="", members=[])
    rebalance_timeout = req.session_timeout_ms if v == 0 else req.rebalance_timeout_ms
    host = str(ctx.connection.peer).rsplit(":", 1)[0]
    result = await ctx.server.group_coordinator.handle_join_group(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        require_known_member_id=v >= 4,
        client_id=ctx.client_id or "",
        client_host="/" + host,
        rebalance_timeout_ms=rebalance_timeout,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
    )
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=False,
        member_id=result.member_id,
        members=[JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md) for m, i, md in result.members],
    )

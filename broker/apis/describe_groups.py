"""DescribeGroups (key 15), versions 0-5.

Per group: state, protocol type, protocol (only when Stable, else ""), members. Members carry
their metadata and assignment only when the group is Stable (Kafka's GroupMetadata.summary). An
unknown group is described as Dead with no members and no error (as Kafka before v6).
A group without DESCRIBE is GROUP_AUTHORIZATION_FAILED (listed first, as Kafka). v3+ authorized
operations when asked for, from the ACLs, for every group answered without error (every group
operation without an authorizer, as Kafka's AuthHelper); v4+ group instance ids.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.authorized_operations import NOT_REQUESTED
from broker.context import RequestContext
from broker.group.metadata import GroupState
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember


@api(15, 0, 5)
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    gc = ctx.server.group_coordinator
    with_ops = ctx.version >= 3 and req.include_authorized_operations
    out = [DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="",
                          authorized_operations=NOT_REQUESTED)
           for g in req.groups if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    denied = {g.group_id for g in out}
    for group_id in req.groups:
        if group_id in denied:
            continue
        ops = ctx.authorized_operations(ResourceType.GROUP, group_id) if with_ops else NOT_REQUESTED
        code, group = gc.handle_describe_group(group_id)
        if code or group is None:
            out.append(DescribedGroup(error_code=code, group_id=group_id, group_state="Dead" if not code else "",
                                      authorized_operations=NOT_REQUESTED if code else ops))
            continue
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name or "" if stable else ""
        members = [
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        out.append(
            DescribedGroup(
                error_code=0,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=protocol,
                members=members,
                authorized_operations=ops,
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)

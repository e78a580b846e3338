"""DescribeGroups (key 15), versions 0-5.

Per group: state, protocol type, protocol (only when Stable, else ""), members. Members carry
their metadata and assignment only when the group is Stable (Kafka's GroupMetadata.summary). An
unknown group is described as Dead with no members and no error (as Kafka before v6).
v3+ authorized operations when asked for, for every group answered without error (every group
operation: no authorizer, as Kafka's AuthHelper); v4+ group instance ids.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.authorized_operations import GROUP_OPERATIONS, NOT_REQUESTED, if_requested
from broker.context import RequestContext
from broker.group.metadata import GroupState
from protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember


@api(15, 0, 5)
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    gc = ctx.server.group_coordinator
    ops = if_requested(ctx.version >= 3 and req.include_authorized_operations, GROUP_OPERATIONS)
    out = []
    for group_id in req.groups:
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

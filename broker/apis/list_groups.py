"""ListGroups (key 16), versions 0-5.

Every live group this broker coordinates, with its protocol type; v4+ its state and an
optional states filter (case-insensitive, as Kafka); v5+ its type ("classic") and a types
filter (only "classic" groups exist here). Without DESCRIBE on the cluster only the groups the
caller may DESCRIBE are listed (KafkaApis.handleListGroupsRequest).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.messages import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_groups_response import ListedGroup


@api(16, 0, 5)
async def handle(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.lower() for s in req.states_filter} if ctx.version >= 4 and req.states_filter else None
    types = {t.lower() for t in req.types_filter} if ctx.version >= 5 and req.types_filter else None
    if types is not None and "classic" not in types:
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[])
    groups = ctx.server.group_coordinator.handle_list_groups(states)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        groups = [g for g in groups if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=0,
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )
            for g in groups
        ],
    )

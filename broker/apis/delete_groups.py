"""DeleteGroups (key 42), versions 0-2.

Only an empty group can be deleted (else NON_EMPTY_GROUP; unknown: GROUP_ID_NOT_FOUND). The
group's metadata and committed offsets are tombstoned in `__consumer_offsets`. Needs DELETE on
each GROUP (else GROUP_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.delete_groups_response import DeletableGroupResult


@api(42, 0, 2)
async def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    allowed = ctx.authorized_names(AclOperation.DELETE, ResourceType.GROUP, req.groups_names)
    results = await ctx.server.group_coordinator.handle_delete_groups([g for g in req.groups_names if g in allowed])
    for g in req.groups_names:
        if g not in allowed:
            results[g] = ErrorCode.GROUP_AUTHORIZATION_FAILED
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[DeletableGroupResult(group_id=g, error_code=results[g]) for g in req.groups_names],
    )

"""DeleteAcls (key 31), versions 0-3 (Kafka 3.9's AclApis.handleDeleteAcls).

Needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED for every filter); without an
authorizer SECURITY_DISABLED. Each filter answers the bindings it deleted (AclAuthorizer.deleteAcls:
a binding two filters match is reported under the first; a filter naming exactly one resource
reaches it even before this broker's cache has it). Answered once the deletions are durable.
"""

from __future__ import annotations

from broker.apis._acls import NO_AUTHORIZER, filter_of
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsMatchingAcl


@api(31, 0, 3)
async def handle(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = [filter_of(f) for f in req.filters]

    def every(code: int, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in filters])

    if not ctx.authorize_cluster(AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    auth = ctx.server.authorizer
    if auth is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    deleted = await auth.delete_acls(filters)
    results = [
        DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[
            DeleteAclsMatchingAcl(
                error_code=err.code if err else 0, error_message=err.message if err else None,
                resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation, permission_type=b.entry.permission_type)
            for b, err in bindings])
        for bindings in deleted]
    await ctx.committed([m for r in results for m in r.matching_acls])
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)

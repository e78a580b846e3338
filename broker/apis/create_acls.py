"""CreateAcls (key 30), versions 0-3 (Kafka 3.9's AclApis.handleCreateAcls).

Needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED for every creation); without an
authorizer every creation is SECURITY_DISABLED. A CLUSTER resource not named `kafka-cluster` or
an empty name is INVALID_REQUEST with Kafka's message; the authorizer refuses a name with '/'
(INVALID_REQUEST "Failed to create ACL"). The others are stored (broker.security.acl_store) and
answered once durable: ZooKeeper written, or the single node's metadata file synced. Creating an
ACL that exists already succeeds. v0 carries no pattern type (LITERAL); v2+ is flexible.
"""

from __future__ import annotations

from broker.apis._acls import NO_AUTHORIZER, binding_of, create_problem
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import CreateAclsRequest, CreateAclsResponse
from protocol.messages.create_acls_response import AclCreationResult


@api(30, 0, 3)
async def handle(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    bindings = [binding_of(c) for c in req.creations]

    def every(code: int, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            AclCreationResult(error_code=code, error_message=message) for _ in bindings])

    if not ctx.authorize_cluster(AclOperation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    auth = ctx.server.authorizer
    if auth is None:
        return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    results: list[AclCreationResult | None] = [None] * len(bindings)
    valid = []
    for i, b in enumerate(bindings):
        problem = create_problem(b)
        if problem is not None:
            results[i] = AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
        else:
            valid.append(i)
    created = await auth.create_acls([bindings[i] for i in valid])
    for i, err in zip(valid, created, strict=True):
        results[i] = AclCreationResult(error_code=err.code if err else 0, error_message=err.message if err else None)
    out = [r for r in results if r is not None]
    await ctx.committed(out)
    return CreateAclsResponse(throttle_time_ms=0, results=out)

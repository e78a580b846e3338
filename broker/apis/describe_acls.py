"""DescribeAcls (key 29), versions 0-3 (Kafka 3.9's AclApis.handleDescribeAcls).

Needs DESCRIBE on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer
SECURITY_DISABLED. The ACLs the filter matches (ResourcePatternFilter: LITERAL/PREFIXED exact,
ANY any pattern of that name, MATCH what applies to the name: the literal, `*` and prefixes),
grouped by resource pattern, from this broker's cache. v0 has no pattern type (LITERAL).
"""

from __future__ import annotations

from broker.apis._acls import NO_AUTHORIZER, filter_of
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource


@api(29, 0, 3)
async def handle(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    flt = filter_of(req)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.", resources=[])
    auth = ctx.server.authorizer
    if auth is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message=NO_AUTHORIZER, resources=[])
    resources: dict[object, DescribeAclsResource] = {}
    for b in auth.acls(flt):
        p = b.pattern
        res = resources.get(p)
        if res is None:
            res = resources[p] = DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name,
                                                      pattern_type=p.pattern_type, acls=[])
        e = b.entry
        res.acls.append(AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                       permission_type=e.permission_type))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                resources=list(resources.values()))

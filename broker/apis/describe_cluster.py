"""DescribeCluster (key 60), versions 0-1: brokers, cluster id and controller id (KIP-700).

As Kafka's AuthHelper.computeDescribeClusterResponse: v1 names the endpoint type wanted (KIP-919);
a broker answers only for brokers (1). An unknown type gets UNSUPPORTED_ENDPOINT_TYPE, a
controller request MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST for either in v0, which cannot carry
the field anyway), both with the schema's default endpoint type in the answer. Cluster authorized
operations, when asked for, come from the ACLs (0 without DESCRIBE on the cluster; every cluster
operation without an authorizer)."""

from __future__ import annotations

from broker.apis.registry import api
from broker.authorized_operations import if_requested
from broker.context import RequestContext
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from controller.image import MetadataImage
from protocol.errors import ErrorCode
from protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_cluster_response import DescribeClusterBroker

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


def _endpoint_error(version: int, wanted: int) -> DescribeClusterResponse | None:
    if wanted == BROKER_ENDPOINT:
        return None
    if wanted not in ENDPOINT_NAMES:
        code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {wanted}"
    else:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                   f"of type {ENDPOINT_NAMES[wanted]}")
    return DescribeClusterResponse(
        error_code=ErrorCode.INVALID_REQUEST if version == 0 else code, error_message=message)


@api(60, 0, 1)
async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    error = _endpoint_error(ctx.version, req.endpoint_type)
    if error is not None:
        return error
    image = ctx.server.metadata_cache.image
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        cluster_authorized_operations=if_requested(
            req.include_cluster_authorized_operations,
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0),
        brokers=_brokers(ctx, image),
    )


def _brokers(ctx: RequestContext, image: MetadataImage) -> list[DescribeClusterBroker]:
    """The live brokers; in ZooKeeper mode each with its endpoint on the listener the client
    connected to, brokers without one left out (Kafka's getAliveBrokerNodes(listenerName))."""
    ordered = sorted(image.brokers.values(), key=lambda b: b.broker_id)
    if not ctx.server.zk_mode:
        return [DescribeClusterBroker(broker_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
                for b in ordered if (ep := b.address(ctx.connection.listener.name))]
    listener = ctx.connection.listener.name
    return [DescribeClusterBroker(broker_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
            for b in ordered if (ep := b.endpoint(listener)) is not None]

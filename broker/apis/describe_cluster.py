"""DescribeCluster (key 60), versions 0-1: brokers, cluster id and controller id (KIP-700).
v1 carries the endpoint type; only brokers (1) are described."""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_cluster_response import DescribeClusterBroker


@api(60, 0, 1)
async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    if ctx.version >= 1 and req.endpoint_type != 1:
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, error_message="Only brokers can be described",
            endpoint_type=req.endpoint_type,
        )
    image = ctx.server.controller.image
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        endpoint_type=1,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=[
            DescribeClusterBroker(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
        ],
    )

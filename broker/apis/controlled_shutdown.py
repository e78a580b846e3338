"""ControlledShutdown (key 7), versions 0-3: a broker about to stop asks the controller to move
its leaderships away first (ZooKeeper mode only; Kafka 3.9's brokers send v3).

As Kafka's KafkaApis.handleControlledShutdownRequest -> KafkaController.controlledShutdown: only
the active controller acts (NOT_CONTROLLER otherwise, so the broker looks the controller up
again), a broker epoch older than the one registered is STALE_BROKER_EPOCH, an unknown broker
BROKER_NOT_AVAILABLE. The answer lists the partitions the broker still leads (a single replica,
or no other live replica in the ISR): the broker retries until none remain or its retries run
out (broker.controlled_shutdown)."""

from __future__ import annotations

from typing import cast

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from controller.interface import ClusterController
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from protocol.messages.controlled_shutdown_response import RemainingPartition


@api(7, 0, 3, zk_only=True)
async def handle(ctx: RequestContext, req: ControlledShutdownRequest) -> ControlledShutdownResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = cast(ClusterController, ctx.server.controller)
    broker_epoch = req.broker_epoch if ctx.version >= 2 else -1
    try:
        remaining = await controller.controlled_shutdown(req.broker_id, broker_epoch)
    except KafkaProtocolError as e:
        return ControlledShutdownResponse(error_code=e.code)
    return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
        RemainingPartition(topic_name=t, partition_index=p) for t, p in sorted(remaining)])

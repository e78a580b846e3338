"""AlterPartition (key 56), versions 0-3: a partition leader asks the controller to change its
ISR (ZooKeeper mode: the controller validates the leader and partition epochs, compare-and-sets
the state znode and answers with the new state; replication sends it).

As Kafka's KafkaApis.handleAlterPartitionRequest: a broker that is not the active controller
answers NOT_CONTROLLER at the top level, and the leader looks the controller up again."""

from __future__ import annotations

from typing import Any, cast

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from controller.interface import ClusterController
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionRequest, AlterPartitionResponse


@api(56, 0, 3, zk_only=True)
async def handle(ctx: RequestContext, req: AlterPartitionRequest) -> Any:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = cast(ClusterController, ctx.server.controller)
    if not controller.is_active_controller:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return await controller.alter_partition(req, ctx.version)

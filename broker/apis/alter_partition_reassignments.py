"""AlterPartitionReassignments (key 45), version 0: start or cancel partition reassignments
(`kafka-reassign-partitions --execute/--cancel`, Admin.alterPartitionReassignments), ZooKeeper
mode.

As Kafka 3.9's KafkaApis.handleAlterPartitionReassignmentsRequest with a ZooKeeper controller:
the active controller does the work (KafkaController.onPartitionReassignment); any other broker
answers NOT_CONTROLLER at the top level, so the admin client finds the controller again. Null
replicas cancel the partition's reassignment. A partition's answer means the reassignment
started (or the cancellation took), not that it completed: ListPartitionReassignments shows it
until the target replicas are in the ISR."""

from __future__ import annotations

from collections import defaultdict
from typing import cast

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from controller.interface import ClusterController
from protocol.errors import ErrorCode, error_info
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)


@api(45, 0, 0, zk_only=True)
async def handle(ctx: RequestContext, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(error_code=code, error_message=error_info(code).message)
    reassignments: dict[tuple[str, int], list[int] | None] = {
        (t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
        for t in req.topics for p in t.partitions}
    controller = cast(ClusterController, ctx.server.controller)
    outcome = await controller.alter_partition_reassignments(reassignments)
    if isinstance(outcome, tuple):
        code, message = outcome  # Kafka's ApiError(error): the error's own message
        return AlterPartitionReassignmentsResponse(
            error_code=code, error_message=error_info(code).message if message is None else message)
    by_topic: dict[str, list[ReassignablePartitionResponse]] = defaultdict(list)
    for (topic, partition), (code, message) in outcome.items():
        # Kafka's ApiError.message: the error's default message when none was given; null for NONE
        by_topic[topic].append(ReassignablePartitionResponse(
            partition_index=partition, error_code=code,
            error_message=message if message is not None or code == ErrorCode.NONE else error_info(code).message))
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, responses=[
        ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])

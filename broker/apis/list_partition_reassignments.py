"""ListPartitionReassignments (key 46), version 0: the reassignments in progress
(`kafka-reassign-partitions --verify/--list`, Admin.listPartitionReassignments), ZooKeeper mode.

As Kafka 3.9's KafkaApis.handleListPartitionReassignmentsRequest with a ZooKeeper controller:
the active controller answers from its context (each partition's replicas = target + origin, and
the adding and removing ones); other brokers answer NOT_CONTROLLER. Null topics list every
partition being reassigned; named partitions not being reassigned are left out."""

from __future__ import annotations

from collections import defaultdict
from typing import cast

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from controller.interface import ClusterController
from protocol.errors import ErrorCode, error_info
from protocol.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from protocol.messages.list_partition_reassignments_response import (
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)


@api(46, 0, 0, zk_only=True)
async def handle(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ListPartitionReassignmentsResponse(error_code=code, error_message=error_info(code).message)
    partitions = None if req.topics is None else {
        (t.name, p) for t in req.topics for p in t.partition_indexes}
    controller = cast(ClusterController, ctx.server.controller)
    outcome = await controller.list_partition_reassignments(partitions)
    if isinstance(outcome, tuple):
        code, message = outcome  # Kafka's ApiError(error): the error's own message
        return ListPartitionReassignmentsResponse(
            error_code=code, error_message=error_info(code).message if message is None else message)
    by_topic: dict[str, list[OngoingPartitionReassignment]] = defaultdict(list)
    for (topic, partition), a in outcome.items():
        by_topic[topic].append(OngoingPartitionReassignment(
            partition_index=partition, replicas=list(a.replicas), adding_replicas=list(a.adding_replicas),
            removing_replicas=list(a.removing_replicas)))
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, topics=[
        OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])

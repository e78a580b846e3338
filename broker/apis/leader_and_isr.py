"""LeaderAndIsr (key 4), versions 0-7: the controller tells this broker which partitions it leads
and which it follows (ZooKeeper mode only; Kafka 3.9's controller sends v7).

As Kafka's KafkaApis.handleLeaderAndIsrRequest and ReplicaManager.becomeLeaderOrFollower (see
broker.replica_manager): a broker epoch older than this broker's registration is answered
STALE_BROKER_EPOCH, an older controller epoch STALE_CONTROLLER_EPOCH -- for the whole request,
every partition listed with the error. Otherwise each partition gets NONE (applied: leader or
follower, its log created if needed) or KAFKA_STORAGE_ERROR, INCONSISTENT_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION (this broker is not a replica), STALE_CONTROLLER_EPOCH (the leader
epoch is not newer than the one it has).
Per version: v1 is_new, v2 states grouped by topic + broker epoch, v3 adding/removing replicas,
v5 topic ids and the response grouped by topic id, v6 leader recovery state, v7 KRaft
controller flag.
"""

from __future__ import annotations

from typing import Any

from broker.apis._control import broker_epoch_is_stale
from broker.apis.registry import api
from broker.context import RequestContext
from broker.replica_manager import leader_and_isr_partition_states
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrTopicError,
)


def response_for(req: LeaderAndIsrRequest, version: int, errors: dict[tuple[str, int], int],
                 error_code: int = ErrorCode.NONE) -> LeaderAndIsrResponse:
    """Per-partition errors in the version's layout: v0-4 a flat list with topic names, v5+
    grouped by the request's topic ids."""
    if version < 5:
        return LeaderAndIsrResponse(error_code=error_code, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in errors.items()])
    topic_ids = {t.topic_name: t.topic_id for t in req.topic_states}
    topics: dict[str, LeaderAndIsrTopicError] = {}
    for (t, p), e in errors.items():
        topic = topics.get(t)
        if topic is None:
            topic = topics[t] = LeaderAndIsrTopicError(topic_id=topic_ids[t], partition_errors=[])
        topic.partition_errors.append(LeaderAndIsrPartitionError(partition_index=p, error_code=e))
    return LeaderAndIsrResponse(error_code=error_code, topics=list(topics.values()))


def error_response(req: LeaderAndIsrRequest, version: int, code: int) -> LeaderAndIsrResponse:
    """LeaderAndIsrRequest.getErrorResponse: the error for the request and every partition."""
    states: list[Any] = list(leader_and_isr_partition_states(req, version))
    return response_for(req, version, {(s.topic_name, s.partition_index): code for s in states}, code)


@api(4, 0, 7, zk_only=True)
async def handle(ctx: RequestContext, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):  # the controller's principal needs CLUSTER_ACTION
        return error_response(req, ctx.version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if broker_epoch_is_stale(ctx, req.broker_epoch, "LeaderAndIsr"):
        return error_response(req, ctx.version, ErrorCode.STALE_BROKER_EPOCH)
    result = await ctx.server.replica_manager.become_leader_or_follower(ctx.header.correlation_id, req, ctx.version)
    if isinstance(result, int):
        return error_response(req, ctx.version, result)
    return response_for(req, ctx.version, result)

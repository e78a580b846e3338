"""StopReplica (key 5), versions 0-4: the controller tells this broker to stop serving partitions,
and with delete_partition to delete them (ZooKeeper mode only; Kafka 3.9's controller sends v4).

As Kafka's KafkaApis.handleStopReplicaRequest and ReplicaManager.stopReplicas (see
broker.replica_manager): a broker epoch older than this broker's registration is answered
STALE_BROKER_EPOCH and an older controller epoch STALE_CONTROLLER_EPOCH, both with no partition
errors. Otherwise each partition gets NONE, FENCED_LEADER_EPOCH (its leader epoch is older than
the partition's) or KAFKA_STORAGE_ERROR (offline, or its log could not be deleted).
Per version: v0 a flat list and one delete flag, v1 grouped by topic + broker epoch, v3 a leader
epoch and delete flag per partition (-2: the topic is being deleted).
"""

from __future__ import annotations

from broker.apis._control import broker_epoch_is_stale
from broker.apis.registry import api
from broker.context import RequestContext
from broker.replica_manager import stop_replica_partition_states
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import StopReplicaRequest, StopReplicaResponse
from protocol.messages.stop_replica_response import StopReplicaPartitionError


@api(5, 0, 4, zk_only=True)
async def handle(ctx: RequestContext, req: StopReplicaRequest) -> StopReplicaResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):  # StopReplicaRequest.getErrorResponse: the error for every partition too
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, partition_errors=[
            StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for t, p in stop_replica_partition_states(req, ctx.version)])
    if broker_epoch_is_stale(ctx, req.broker_epoch, "StopReplica"):
        return StopReplicaResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    results, error = await ctx.server.replica_manager.stop_replicas(ctx.header.correlation_id, req, ctx.version)
    return StopReplicaResponse(error_code=error, partition_errors=[
        StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=e) for (t, p), e in results.items()])

"""UpdateMetadata (key 6), versions 0-8: the controller's view of the cluster for this broker's
MetadataCache (ZooKeeper mode only; Kafka 3.9's controller sends v8).

As Kafka's KafkaApis.handleUpdateMetadataRequest / ReplicaManager.maybeUpdateMetadataCache:
* a broker epoch older than this broker's registration: STALE_BROKER_EPOCH, nothing applied;
* a controller epoch older than the latest this broker has seen: STALE_CONTROLLER_EPOCH
  (Kafka's ControllerMovedException), nothing applied -- a deposed controller cannot overwrite
  its successor's metadata;
* otherwise the cache takes the live brokers (every endpoint, rack) and controller id, and merges
  the partition states (leader, leader epoch, replicas, ISR, offline replicas, topic ids);
  partitions named with leader -2 are deleted.
Per version (UpdateMetadataRequest.normalize): v0 one PLAINTEXT host/port per broker, v1-2
endpoints named by security protocol, v2 racks, v3 listener names, v4 offline replicas, v5
grouped by topic + broker epoch, v7 topic ids, v8 type and KRaft controller flag (no migration
here: a request from a KRaft controller is treated as any other).
"""

from __future__ import annotations

from broker.apis._control import broker_epoch_is_stale
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import UpdateMetadataRequest, UpdateMetadataResponse


@api(6, 0, 8, zk_only=True)
async def handle(ctx: RequestContext, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if broker_epoch_is_stale(ctx, req.broker_epoch, "update metadata"):
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    try:
        await ctx.server.replica_manager.maybe_update_metadata_cache(ctx.header.correlation_id, req, ctx.version)
    except KafkaProtocolError as e:
        return UpdateMetadataResponse(error_code=e.code)
    return UpdateMetadataResponse(error_code=ErrorCode.NONE)

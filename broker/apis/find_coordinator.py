"""FindCoordinator (key 10), versions 0-4.

* key_type 0 (group): the coordinator is the leader of the group's `__consumer_offsets`
  partition, abs(javaHash(group)) % partitions; the topic is created on first use (compacted,
  `offsets.topic.num.partitions` partitions). On one node that is this broker.
* key_type 1 (transaction): no transaction coordinator yet: COORDINATOR_NOT_AVAILABLE.
* Other key types: INVALID_REQUEST. v0 has no key_type (always group).
* v1+ carry an error message (Kafka sends the error's message, "NONE" on success); v4 batches keys
  in `coordinator_keys` and answers per key in `coordinators`.
* ZooKeeper mode: the leader comes from the MetadataCache, with its endpoint on the client's
  listener; until the controller's UpdateMetadata shows the topic (just created) or a live leader
  of the partition, COORDINATOR_NOT_AVAILABLE (clients retry), as Kafka answers.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.group.coordinator import GROUP_METADATA_TOPIC
from protocol.errors import ErrorCode, error_info
from protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.find_coordinator_response import Coordinator


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[int, int, str, int]:
    if key_type == 1:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if key_type != 0:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    gc = ctx.server.group_coordinator  # an empty key is a group too ("" may commit offsets)
    if not gc.ensure_offsets_topic():
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    cache = ctx.server.metadata_cache
    if ctx.server.zk_mode:
        partition = cache.partition(GROUP_METADATA_TOPIC, gc.partition_for(key))
        node = cache.brokers.get(partition.leader) if partition is not None else None
        endpoint = node.endpoint(ctx.connection.listener.name) if node is not None else None
        if node is None or endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, node.broker_id, endpoint[0], endpoint[1]
    topic = cache.topics[GROUP_METADATA_TOPIC]
    leader = topic.partitions[gc.partition_for(key)].leader
    node = cache.brokers.get(leader)
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, node.broker_id, node.host, node.port


async def _hosted(ctx: RequestContext, keys: list[str]) -> bool:
    """A coordinator partition of `__consumer_offsets` just created is hosted by an executor job:
    answer once it is (the controller's committed()), so the client's next JoinGroup does not
    get NOT_COORDINATOR. Nothing waits once the partitions exist. False when the topic could not
    be written (a full disk): the keys are answered COORDINATOR_NOT_AVAILABLE, which clients
    retry."""
    gc = ctx.server.group_coordinator
    if ctx.server.zk_mode:  # the coordinator may be another broker: its hosting is its own
        return True
    if any(not gc.is_coordinator_for(k) for k in keys):
        return await ctx.committed() is None
    return True


def _message(code: int) -> str:
    return "NONE" if code == 0 else error_info(code).message


@api(10, 0, 4)
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, node_id, host, port = _lookup(ctx, key, req.key_type)
            coordinators.append(
                Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=code, error_message=_message(code))
            )
        found = [c for c in coordinators if c.error_code == ErrorCode.NONE]
        if not await _hosted(ctx, [c.key for c in found]):
            for c in found:
                c.error_code, c.error_message = ErrorCode.COORDINATOR_NOT_AVAILABLE, _message(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                c.node_id, c.host, c.port = -1, "", -1
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    key_type = req.key_type if ctx.version >= 1 else 0
    code, node_id, host, port = _lookup(ctx, req.key, key_type)
    if code == ErrorCode.NONE and not await _hosted(ctx, [req.key]):
        code, node_id, host, port = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=code, error_message=_message(code), node_id=node_id, host=host, port=port
    )

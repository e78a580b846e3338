"""FindCoordinator (key 10), versions 0-4.

* key_type 0 (group): the coordinator is the leader of the group's `__consumer_offsets`
  partition, abs(javaHash(group)) % partitions; the topic is created on first use (compacted,
  `offsets.topic.num.partitions` partitions). On one node that is this broker.
* key_type 1 (transaction): the leader of the transactional id's `__transaction_state`
  partition, the topic created on first use (`transaction.state.log.*`), the same way.
* Authorization (before the internal topic is created): DESCRIBE on the GROUP (else
  GROUP_AUTHORIZATION_FAILED) or on the TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
* Other key types: INVALID_REQUEST. v0 has no key_type (always group).
* v1+ carry an error message (Kafka sends the error's message, "NONE" on success); v4 batches keys
  in `coordinator_keys` and answers per key in `coordinators`.
* ZooKeeper mode: the leader comes from the MetadataCache, with its endpoint on the client's
  listener; until the controller's UpdateMetadata shows the topic (just created) or a live leader
  of the partition, COORDINATOR_NOT_AVAILABLE (clients retry), as Kafka answers. Kafka answers
  the leader whether or not it has loaded the partition yet; the coordinator's own requests then
  answer COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, error_info
from protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.find_coordinator_response import Coordinator

GROUP, TRANSACTION = 0, 1


def _runtime(ctx: RequestContext, key_type: int) -> Any:
    """The coordinator runtime of the key type (None: a key type Kafka 3.9 does not serve in
    ZooKeeper mode)."""
    if key_type == GROUP:
        return ctx.server.group_coordinator.runtime
    if key_type == TRANSACTION:
        return ctx.server.transaction_coordinator.state_manager.runtime
    return None


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[int, int, str, int]:
    runtime = _runtime(ctx, key_type)  # an empty key is a group too ("" may commit offsets)
    if runtime is None:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
    if not runtime.ensure_topic():
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    cache = ctx.server.metadata_cache
    name = runtime.topic.name
    if ctx.server.zk_mode:
        partition = cache.partition(name, runtime.partition_for(key))
        node = cache.brokers.get(partition.leader) if partition is not None else None
        endpoint = node.endpoint(ctx.connection.listener.name) if node is not None else None
        if node is None or endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return ErrorCode.NONE, node.broker_id, endpoint[0], endpoint[1]
    topic = cache.topics[name]
    leader = topic.partitions[runtime.partition_for(key)].leader
    node = cache.brokers.get(leader)
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    host, port = node.address(ctx.connection.listener.name)
    return ErrorCode.NONE, node.broker_id, host, port


async def _hosted(ctx: RequestContext, keys: list[str], key_type: int) -> bool:
    """A coordinator partition just created on a single node is hosted by an executor job:
    answer once it is (the controller's committed()), so the client's next request (JoinGroup,
    InitProducerId) does not get NOT_COORDINATOR. Nothing waits once the partitions exist.
    False when the topic could not be written (a full disk): the keys are answered
    COORDINATOR_NOT_AVAILABLE, which clients retry."""
    if ctx.server.zk_mode:  # the coordinator may be another broker: its hosting is its own
        return True
    runtime = _runtime(ctx, key_type)
    if any(not runtime.is_active(runtime.partition_for(k)) for k in keys):
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
        if found and not await _hosted(ctx, [c.key for c in found], req.key_type):
            for c in found:
                c.error_code, c.error_message = ErrorCode.COORDINATOR_NOT_AVAILABLE, _message(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                c.node_id, c.host, c.port = -1, "", -1
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    key_type = req.key_type if ctx.version >= 1 else 0
    code, node_id, host, port = _lookup(ctx, req.key, key_type)
    if code == ErrorCode.NONE and not await _hosted(ctx, [req.key], key_type):
        code, node_id, host, port = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=code, error_message=_message(code), node_id=node_id, host=host, port=port
    )

"""ElectLeaders (key 43), versions 0-2: preferred or unclean leader election on request
(`kafka-leader-election`, AdminClient.electLeaders), ZooKeeper mode.

As Kafka's KafkaApis.handleElectLeaders and ReplicaManager.electLeaders: the active controller
elects (any other broker's controller answers NOT_CONTROLLER per partition: the admin client
sends it to the controller); partitions whose election started are answered once this broker's
metadata shows the elected leader (DelayedElectLeader), REQUEST_TIMED_OUT for those that do not
within the request's timeout. Null partitions mean every partition in the metadata, and then the
ones that needed no election are left out of the answer. v0 has no election type (preferred)
and no top-level error code."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Any, cast

from broker.apis.registry import api
from broker.context import RequestContext
from broker.metadata_cache import MetadataCache
from broker.security.acl import AclOperation
from controller.interface import ClusterController
from protocol.errors import ErrorCode
from protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult

ELECTION_TYPES = {0: "PREFERRED", 1: "UNCLEAN"}


@api(43, 0, 2, zk_only=True)
async def handle(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = ELECTION_TYPES.get(req.election_type if ctx.version >= 1 else 0)
    if election_type is None:
        return ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST)
    if not ctx.authorize_cluster(AclOperation.ALTER):  # the error for the request and each partition
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ElectLeadersResponse(error_code=denied, replica_election_results=[
            ReplicaElectionResult(topic=t.topic, partition_result=[
                PartitionResult(partition_id=p, error_code=denied, error_message=None) for p in t.partitions])
            for t in req.topic_partitions or []])
    cache = ctx.server.metadata_cache
    if req.topic_partitions is None:
        partitions = {(t.name, p) for t in cache.topics.values() for p in t.partitions}
    else:
        partitions = {(t.topic, p) for t in req.topic_partitions for p in t.partitions}
    controller = cast(ClusterController, ctx.server.controller)
    outcome = await controller.elect_leaders(partitions, election_type)
    results: dict[tuple[str, int], tuple[int, str | None]] = {
        tp: r for tp, r in outcome.items() if isinstance(r, tuple)}
    expected = {tp: r for tp, r in outcome.items() if not isinstance(r, tuple)}
    if expected:
        shown = await _until_leaders_shown(cache, expected, req.timeout_ms / 1000)
        results.update({tp: (ErrorCode.NONE if tp in shown else ErrorCode.REQUEST_TIMED_OUT, None) for tp in expected})
    if req.topic_partitions is None:
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    by_topic: dict[str, list[PartitionResult]] = defaultdict(list)
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic[topic].append(PartitionResult(partition_id=partition, error_code=code, error_message=message))
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=[
        ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


async def _until_leaders_shown(cache: MetadataCache, expected: dict[Any, int], timeout_s: float) -> set[Any]:
    """The partitions whose leader in this broker's metadata is the expected one, waiting (on
    each UpdateMetadata) until all are or `timeout_s` passes."""
    def shown() -> set[Any]:
        out = set()
        for tp, leader in expected.items():
            p = cache.partition(*tp)
            if p is not None and p.leader == leader:
                out.add(tp)
        return out

    changed = asyncio.Event()

    def on_update(_image: Any) -> None:
        changed.set()

    cache.listeners.append(on_update)
    try:
        async def wait_all() -> None:
            while len(shown()) < len(expected):
                changed.clear()
                await changed.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wait_all(), max(0.0, timeout_s))
        return shown()
    finally:
        cache.listeners.remove(on_update)

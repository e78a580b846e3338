"""CreatePartitions (key 37), versions 0-3: grow a topic to `count` partitions, optionally with
explicit assignments for the new ones; validate_only checks and changes nothing. Errors:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not larger than now), INVALID_REPLICA_ASSIGNMENT,
INVALID_REQUEST for a topic named twice. More than `max.request.partitions` new partitions in
one request: POLICY_VIOLATION for every topic (Kafka's controller bounds the records of one
request the same way); a topic that would take this broker past `max.broker.partitions` or too
close to its open-files limit: POLICY_VIOLATION (broker.partition_limits).
* controller_mutation_rate (broker/quota/controller_mutation.py): the partitions created or deleted
  are taken from the client's token bucket; from v3 (strict) a topic that comes while it is below
  zero is THROTTLING_QUOTA_EXCEEDED, before that only throttle_time_ms says so; the connection is
  muted for the throttle time.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.apis._control import not_the_controller
from broker.apis.registry import api
from broker.context import RequestContext
from broker.partition_limits import (
    FILES_PER_PARTITION,
    check_broker_partitions,
    check_request_partitions,
    open_files,
)
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_partitions_response import CreatePartitionsTopicResult


@api(37, 0, 3)
async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    if not_the_controller(ctx):
        return CreatePartitionsResponse(throttle_time_ms=0, results=[
            CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NOT_CONTROLLER) for t in req.topics])
    controller = ctx.server.controller
    cfg = ctx.server.config
    counts = Counter(t.name for t in req.topics)
    results = []
    too_many = _request_limit_error(req, ctx.server.metadata_cache.topics, cfg["max.request.partitions"])
    hosted = len(ctx.server.replica_manager.partitions)
    files = open_files()  # once: each topic grown below adds what it opens
    quota = ctx.controller_mutation_quota(strict_since=3)
    for t in req.topics:
        if counts[t.name] > 1 and any(r.name == t.name for r in results):
            continue  # Kafka answers a duplicated topic once, with INVALID_REQUEST
        result = CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        try:
            if too_many is not None:
                raise too_many
            if counts[t.name] > 1:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name):
                raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
            topic = ctx.server.metadata_cache.topic(t.name)
            if topic is None:
                raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
            if t.count <= len(topic.partitions):
                raise KafkaProtocolError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {len(topic.partitions)} partitions, which is higher than the requested {t.count}.",
                )
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            adding = t.count - len(topic.partitions)
            check_broker_partitions(hosted, adding, cfg["max.broker.partitions"], files)
            if not req.validate_only:
                if quota is not None:
                    quota.record(adding)
                controller.create_partitions(t.name, t.count, assignments)
                hosted += adding
                files += adding * FILES_PER_PARTITION
        except KafkaProtocolError as e:
            result.error_code, result.error_message = e.code, e.message
        results.append(result)
    await ctx.committed(results)  # durable and hosted before the client is told
    return CreatePartitionsResponse(throttle_time_ms=ctx.mutation_throttle_ms(quota), results=results)


def _request_limit_error(req: CreatePartitionsRequest, topics: Any, limit: int) -> KafkaProtocolError | None:
    """The per-request bound over the partitions the request would add to existing topics."""
    try:
        check_request_partitions(
            (t.count - len(topics[t.name].partitions) for t in req.topics if t.name in topics), limit
        )
    except KafkaProtocolError as e:
        return e
    return None

"""CreatePartitions (key 37), versions 0-3: grow a topic to `count` partitions, optionally with
explicit assignments for the new ones; validate_only checks and changes nothing. Errors:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not larger than now), INVALID_REPLICA_ASSIGNMENT,
INVALID_REQUEST for a topic named twice."""

from __future__ import annotations

from collections import Counter

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from protocol.messages.create_partitions_response import CreatePartitionsTopicResult


@api(37, 0, 3)
async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    controller = ctx.server.controller
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if counts[t.name] > 1 and any(r.name == t.name for r in results):
            continue  # Kafka answers a duplicated topic once, with INVALID_REQUEST
        result = CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        try:
            if counts[t.name] > 1:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            topic = controller.image.topics.get(t.name)
            if topic is None:
                raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
            if t.count <= len(topic.partitions):
                raise KafkaProtocolError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {len(topic.partitions)} partitions, which is higher than the requested {t.count}.",
                )
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            if not req.validate_only:
                controller.create_partitions(t.name, t.count, assignments)
        except KafkaProtocolError as e:
            result.error_code, result.error_message = e.code, e.message
        results.append(result)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)

"""DeleteTopics (key 20), versions 1-6.

v0-5 name topics; v6 names them or gives topic ids. Unknown names get
UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; `delete.topic.enable=false` gives
TOPIC_DELETION_DISABLED. Internal topics cannot be deleted:
INVALID_TOPIC_EXCEPTION with a message. Before anything is deleted, rows are checked as Kafka's
ControllerApis.deleteTopics checks them, each refused with INVALID_REQUEST and answered once: no
name and the zero id, both a name and an id, a name or an id given more than once, a name whose
topic another row names by id.
The partition logs are renamed to `<topic>-<p>.<id>-delete` and removed in the background.
* controller_mutation_rate (broker/quota/controller_mutation.py): the partitions created or deleted
  are taken from the client's token bucket; from v5 (strict) a topic that comes while it is below
  zero is THROTTLING_QUOTA_EXCEEDED, before that only throttle_time_ms says so; the connection is
  muted for the throttle time.
"""

from __future__ import annotations

from collections import Counter

from broker.apis._control import not_the_controller
from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from controller.image import INTERNAL_TOPICS
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.delete_topics_response import DeletableTopicResult
from protocol.primitives import ZERO_UUID


def _invalid(name: str | None, topic_id, message: str) -> DeletableTopicResult:
    return DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                error_message=message)


def _refuse_invalid_rows(wanted: list[tuple[str | None, object]], image) -> tuple[
        list[DeletableTopicResult], list[tuple[str | None, object]]]:
    """Split the rows into INVALID_REQUEST answers and the rows to delete, in request order."""
    refused: list[DeletableTopicResult] = []
    names = Counter(name for name, topic_id in wanted if name is not None and topic_id == ZERO_UUID)
    ids = Counter(topic_id for name, topic_id in wanted if name is None and topic_id != ZERO_UUID)
    for name, topic_id in wanted:
        if name is None and topic_id == ZERO_UUID:
            refused.append(_invalid(None, ZERO_UUID, "Neither topic name nor id were specified."))
        elif name is not None and topic_id != ZERO_UUID:
            refused.append(_invalid(name, topic_id, "You may not specify both topic name and topic id."))
    refused += [_invalid(n, ZERO_UUID, "Duplicate topic name.") for n, c in names.items() if c > 1]
    refused += [_invalid(None, i, "Duplicate topic id.") for i, c in ids.items() if c > 1]
    valid = [(n, i) for n, i in wanted
             if (n is None and ids.get(i) == 1) or (i == ZERO_UUID and names.get(n) == 1)]
    kept = []
    for name, topic_id in valid:
        topic = image.topics.get(name) if name is not None else None
        if topic is not None and ids.get(topic.topic_id) == 1:
            refused.append(_invalid(name, topic.topic_id,
                                    "The provided topic name maps to an ID that was already supplied."))
        else:
            kept.append((name, topic_id))
    return refused, kept


@api(20, 1, 6)
async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    controller = ctx.server.controller
    image = ctx.server.metadata_cache.image
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    if not_the_controller(ctx):
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[
            DeletableTopicResult(name=n, topic_id=i, error_code=ErrorCode.NOT_CONTROLLER) for n, i in wanted])
    results, wanted = _refuse_invalid_rows(wanted, image)
    quota = ctx.controller_mutation_quota(strict_since=5)
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
        try:
            if name is None:
                topic = image.topic_by_id(topic_id)
                if topic is None:
                    raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_ID)
                if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                    raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_ID)  # not disclosed
                name = result.name = topic.name
                if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                    raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
                raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif name not in image.topics:
                raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if not ctx.server.config["delete.topic.enable"]:
                raise KafkaProtocolError(ErrorCode.TOPIC_DELETION_DISABLED)
            if name in INTERNAL_TOPICS:
                raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Internal topic {name} cannot be deleted")
            result.topic_id = image.topics[name].topic_id
            if quota is not None:
                quota.record(len(image.topics[name].partitions))
            controller.delete_topic(name)
        except KafkaProtocolError as e:
            result.error_code = e.code
            result.error_message = e.message
        results.append(result)
    await ctx.committed(results)  # durable and hosted before the client is told
    return DeleteTopicsResponse(throttle_time_ms=ctx.mutation_throttle_ms(quota), responses=results)

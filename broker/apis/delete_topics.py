"""DeleteTopics (key 20), versions 1-6.

v0-5 name topics; v6 names them or gives topic ids. Unknown names get
UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; `delete.topic.enable=false` gives
TOPIC_DELETION_DISABLED. Internal topics cannot be deleted:
INVALID_TOPIC_EXCEPTION with a message.
The partition logs are renamed to `<topic>-<p>.<id>-delete` and removed in the background.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from controller.metadata import INTERNAL_TOPICS
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.delete_topics_response import DeletableTopicResult
from protocol.primitives import ZERO_UUID


@api(20, 1, 6)
async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    controller = ctx.server.controller
    image = controller.image
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
        try:
            if name is None:
                topic = image.topic_by_id(topic_id)
                if topic is None:
                    raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_ID)
                name = result.name = topic.name
            elif name not in image.topics:
                raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if not ctx.server.config["delete.topic.enable"]:
                raise KafkaProtocolError(ErrorCode.TOPIC_DELETION_DISABLED)
            if name in INTERNAL_TOPICS:
                raise KafkaProtocolError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Internal topic {name} cannot be deleted")
            result.topic_id = image.topics[name].topic_id
            controller.delete_topic(name)
        except KafkaProtocolError as e:
            result.error_code = e.code
            result.error_message = e.message
        results.append(result)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

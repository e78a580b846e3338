"""CreateTopics (key 19), versions 2-7.

Per topic: -1 partitions / replication factor take the broker defaults (v4+, KIP-464); manual
replica assignments replace both (and must not be combined with them: INVALID_REQUEST); configs
are validated as topic configs (unknown key or bad value: INVALID_CONFIG) before anything is
created; `validate_only` checks everything and creates nothing (the answer carries a fresh
topic id nonetheless, as Kafka's). v5+ answers the resulting
partition count, replication factor and configs; v7 the topic id. A name given more than once
in one request gets one INVALID_REQUEST answer and nothing is created for it, as Kafka does.
More than `max.request.partitions` new partitions in one request (Kafka: a fixed 10,000) is
answered POLICY_VIOLATION for every topic; so is a topic that would take this broker past
`max.broker.partitions` or too close to its open-files limit (broker.partition_limits).
Authorization (KafkaApis.handleCreateTopicsRequest): CREATE on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED "Authorization failed."); without DESCRIBE_CONFIGS on the topic the
answer has topic_config_error_code TOPIC_AUTHORIZATION_FAILED and no configs, partition count or
replication factor (-1).
* controller_mutation_rate (broker/quota/controller_mutation.py): the partitions created or deleted
  are taken from the client's token bucket; from v6 (strict) a topic that comes while it is below
  zero is THROTTLING_QUOTA_EXCEEDED, before that only throttle_time_ms says so; the connection is
  muted for the throttle time.
"""

from __future__ import annotations

import uuid
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
from protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from storage.config import LogConfig


@api(19, 2, 7)
async def handle(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    if not_the_controller(ctx):
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            CreatableTopicResult(name=t.name, error_code=ErrorCode.NOT_CONTROLLER) for t in req.topics])
    server = ctx.server
    controller = server.controller
    cfg = server.config
    counts = Counter(t.name for t in req.topics)
    results = []
    too_many = _request_limit_error(req, cfg)
    hosted = len(server.replica_manager.partitions)
    files = open_files()  # once: each topic created below adds what it opens
    allowed = ({t.name for t in req.topics} if ctx.authorize_cluster(AclOperation.CREATE) else
               ctx.authorized_names(AclOperation.CREATE, ResourceType.TOPIC, (t.name for t in req.topics)))
    describable = ctx.authorized_names(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, (t.name for t in req.topics))
    quota = ctx.controller_mutation_quota(strict_since=6)
    for t in req.topics:
        if counts[t.name] > 1 and any(r.name == t.name for r in results):
            continue  # the response is keyed by name: one answer per duplicated name
        result = CreatableTopicResult(name=t.name, error_code=0, error_message=None)
        try:
            if too_many is not None:
                raise too_many
            if counts[t.name] > 1:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name} in request.")
            if t.name not in allowed:  # CREATE on the cluster, or on the topic
                raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            configs = {c.name: c.value for c in t.configs}
            if any(v is None for v in configs.values()):
                raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs")
            try:
                defaults = LogConfig.from_props(cfg.topic_defaults())
                effective = LogConfig.from_props(configs, defaults)
            except ValueError as e:
                raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, str(e)) from None
            assignments = None
            num_partitions, rf = t.num_partitions, t.replication_factor
            if t.assignments:
                if num_partitions != -1 or rf != -1:
                    raise KafkaProtocolError(
                        ErrorCode.INVALID_REQUEST,
                        "Both numPartitions or replicationFactor and replicasAssignments were set. "
                        "Both cannot be used at the same time.",
                    )
                assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
                if sorted(assignments) != list(range(len(assignments))):
                    raise KafkaProtocolError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence"
                    )
            else:
                if num_partitions == -1:
                    num_partitions = cfg["num.partitions"]
                if rf == -1:
                    rf = cfg["default.replication.factor"]
            check_broker_partitions(
                hosted, len(assignments) if assignments else num_partitions, cfg["max.broker.partitions"], files
            )
            if req.validate_only:
                if assignments:
                    num_partitions, rf = len(assignments), len(next(iter(assignments.values())))
                controller.validate_new_topic(t.name, num_partitions, rf)
                # Kafka's controller draws the id before it knows the request only validates
                result.topic_id = uuid.uuid4()
            else:
                if quota is not None:
                    quota.record(len(assignments) if assignments else num_partitions)
                topic = controller.create_topic(t.name, num_partitions, rf, configs, assignments)
                result.topic_id = topic.topic_id
                num_partitions = len(topic.partitions)
                hosted += num_partitions
                files += num_partitions * FILES_PER_PARTITION
                rf = len(topic.partitions[0].replicas)
            result.num_partitions = num_partitions
            result.replication_factor = rf
            result.configs = [
                CreatableTopicConfigs(
                    name=k, value=v, read_only=False, config_source=1 if k in configs else 5, is_sensitive=False
                )
                for k, v in sorted(effective.to_props().items())
            ]
        except KafkaProtocolError as e:
            result.error_code = e.code
            result.error_message = e.message
            result.num_partitions = -1
            result.replication_factor = -1
        if t.name not in describable:  # v5+: configs, partitions and replicas only for DESCRIBE_CONFIGS
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.configs, result.num_partitions, result.replication_factor = [], -1, -1
        results.append(result)
    # durable and hosted before the client is told
    if await ctx.committed(changed := [r for r in results if r.error_code == 0]):
        for r in changed:
            r.num_partitions = r.replication_factor = -1
    return CreateTopicsResponse(throttle_time_ms=ctx.mutation_throttle_ms(quota), topics=results)


def _request_limit_error(req: CreateTopicsRequest, cfg: Any) -> KafkaProtocolError | None:
    """Kafka's per-request bound, checked before anything else and answered for every topic."""
    try:
        check_request_partitions(
            (
                len(t.assignments) if t.assignments else cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions
                for t in req.topics
            ),
            cfg["max.request.partitions"],
        )
    except KafkaProtocolError as e:
        return e
    return None

"""Metadata (key 3), versions 0-12.

* v0: an empty topic list means every topic; v1+: null means every topic, empty means none.
* Unknown topics are auto-created (num.partitions, default.replication.factor) when the broker
  allows it (`auto.create.topics.enable`) and the request does (v4+ flag; always before v4);
  otherwise UNKNOWN_TOPIC_OR_PARTITION. Illegal names get INVALID_TOPIC_EXCEPTION. Internal
  topics are never auto-created here (FindCoordinator creates them). Auto-creation is bounded as
  CreateTopics is (max.broker.partitions, open files: POLICY_VIOLATION for that topic).
* v10+ answers topic ids; v12 accepts lookups by id (name null) and answers UNKNOWN_TOPIC_ID.
* Authorization (with an authorizer), as KafkaApis.handleTopicMetadataRequest: a topic without
  DESCRIBE is left out of an all-topics answer and is TOPIC_AUTHORIZATION_FAILED when named
  (whether it exists is not disclosed; a v12 lookup by id echoes the id only); auto-creating a
  topic needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED). Denied
  topics come first, as Kafka lists them.
* Authorized operations (KIP-430), when asked for, from the ACLs (every operation of the type
  without an authorizer): topics in v8+ (errored ones too, as Kafka; not the denied ones), the
  cluster in v8-10 only (v11 moved it to DescribeCluster), 0 without DESCRIBE on the cluster.
* ZooKeeper mode answers from the MetadataCache the controller's UpdateMetadata fills, as Kafka's
  ZkMetadataCache.getTopicMetadata: the live brokers with an endpoint on the listener the client
  connected to; per partition the leader, leader epoch, replicas, ISR and offline replicas, and
  LEADER_NOT_AVAILABLE with leader -1 when the leader is not a live broker (an election is under
  way), LISTENER_NOT_FOUND (v6+) when it is live but lacks the client's listener; v0 lists only
  live replicas and ISR members (REPLICA_NOT_AVAILABLE when some are missing); the controller id
  is the elected controller's. Topics are not auto-created without a controller to create them.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.authorized_operations import if_requested
from broker.context import RequestContext
from broker.partition_limits import check_broker_partitions, open_files
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from controller.image import INTERNAL_TOPICS, MetadataImage, TopicState
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import MetadataRequest, MetadataResponse
from protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.primitives import ZERO_UUID


def topic_response(topic: TopicState) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[
            MetadataResponsePartition(
                error_code=0,
                partition_index=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[],
            )
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        ],
    )


def zk_topic_response(topic: TopicState, image: MetadataImage, listener: str, version: int) -> MetadataResponseTopic:
    """ZkMetadataCache.getPartitionMetadata for one topic (see the module docstring)."""
    brokers = image.brokers
    filter_unavailable = version == 0  # errorUnavailableEndpoints

    def alive(broker_id: int) -> bool:
        b = brokers.get(broker_id)
        return b is not None and b.endpoint(listener) is not None

    partitions = []
    for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
        replicas = [r for r in p.replicas if alive(r)] if filter_unavailable else list(p.replicas)
        isr = [r for r in p.isr if alive(r)] if filter_unavailable else list(p.isr)
        leader = brokers.get(p.leader)
        if leader is None or leader.endpoint(listener) is None:
            # v6+ tell a live leader without the client's listener apart (errorUnavailableListeners)
            code = (ErrorCode.LISTENER_NOT_FOUND if leader is not None and version >= 6
                    else ErrorCode.LEADER_NOT_AVAILABLE)
            leader_id = -1
        else:
            code = ErrorCode.REPLICA_NOT_AVAILABLE if len(replicas) < len(p.replicas) or len(isr) < len(p.isr) else 0
            leader_id = p.leader
        partitions.append(MetadataResponsePartition(
            error_code=code, partition_index=p.partition, leader_id=leader_id, leader_epoch=p.leader_epoch,
            replica_nodes=replicas, isr_nodes=isr, offline_replicas=list(p.offline_replicas)))
    return MetadataResponseTopic(error_code=0, name=topic.name, topic_id=topic.topic_id,
                                 is_internal=topic.is_internal, partitions=partitions)


def error_topic(name: str | None, code: int, topic_id=ZERO_UUID) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False)


@api(3, 0, 12)
async def handle(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    server = ctx.server
    controller = server.controller
    image = server.metadata_cache.image
    cfg = server.config
    v = ctx.version
    allow_auto = (cfg["auto.create.topics.enable"] and (req.allow_auto_topic_creation or v < 4)
                  and controller is not None)
    listener = ctx.connection.listener.name
    render = (lambda t: zk_topic_response(t, image, listener, v)) if server.zk_mode else topic_response

    auto_created: list[MetadataResponseTopic] = []
    denied: list[MetadataResponseTopic] = []  # Kafka lists them first, create denials before describe
    denied_create: list[MetadataResponseTopic] = []
    if req.topics is None or (v == 0 and not req.topics):
        described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, image.topics)
        topics = [render(t) for t in sorted(image.topics.values(), key=lambda t: t.name) if t.name in described]
    else:
        topics = []
        names = [image.topic_by_id(w.topic_id) if w.name is None else w.name for w in req.topics]
        described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                         (n.name if isinstance(n, TopicState) else n for n in names if n is not None))
        may_create_any = allow_auto and ctx.authorize_cluster(AclOperation.CREATE)
        for wanted in req.topics:
            name = wanted.name
            if name is None:
                t = image.topic_by_id(wanted.topic_id)
                if t is not None and t.name not in described:  # the id is echoed, the name not disclosed
                    denied.append(error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, t.topic_id))
                    continue
                topics.append(
                    render(t) if t else error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id)
                )
                continue
            if name not in described:  # its existence is not disclosed
                denied.append(error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            t = image.topics.get(name)
            created = False
            if (t is None and allow_auto and not may_create_any
                    and not ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
                e = error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                e.is_internal = name in INTERNAL_TOPICS
                denied_create.append(e)
                continue
            if t is None and allow_auto and name not in INTERNAL_TOPICS:
                try:
                    # the same per-broker bounds as CreateTopics (max.broker.partitions, open files)
                    check_broker_partitions(len(server.replica_manager.partitions), cfg["num.partitions"],
                                            cfg["max.broker.partitions"], open_files())
                    t = controller.create_topic(
                        name, cfg["num.partitions"], min(cfg["default.replication.factor"], len(image.brokers))
                    )
                    created = True
                except KafkaProtocolError as e:
                    topics.append(error_topic(name, e.code))
                    continue
            if t is None:
                try:
                    from controller.image import validate_topic_name

                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaProtocolError as e:
                    code = e.code
                topics.append(error_topic(name, code))
            else:
                topics.append(render(t))
                if created:
                    auto_created.append(topics[-1])

    if v >= 8 and req.include_topic_authorized_operations:
        for t in topics:
            t.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, t.name or "")
    topics = denied_create + denied + topics
    # durable and hosted first; other Metadata never waits for the disk
    if auto_created and await ctx.committed(auto_created):
        for t in auto_created:  # KAFKA_STORAGE_ERROR (retriable): the client asks again
            t.partitions = []
    if server.zk_mode:  # getAliveBrokerNodes(listenerName): the endpoint the client can use
        brokers = [
            MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            if (ep := b.endpoint(listener)) is not None
        ]
    else:
        brokers = [  # a single node: its address on the client's listener
            MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack)
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
            if (ep := b.address(listener))
        ]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=topics,
        cluster_authorized_operations=if_requested(
            8 <= v <= 10 and req.include_cluster_authorized_operations,
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0),
    )

"""Admin APIs through kafka-python's admin client and raw requests, with answers checked field by
field against what Kafka returns (expectations written from Kafka's docs and specs)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from protocol.messages import (
    ApiVersionsRequest,
    DeleteRecordsRequest,
    DescribeLogDirsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
)
from protocol.messages import delete_records_request as drr
from protocol.messages import metadata_request as mr
from protocol.messages import offset_for_leader_epoch_request as ofl
from tests.broker_process import BrokerProcess
from tests.raw_client import call_once

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError

# What NOTES.md says the broker must advertise (and this issue implements).
EXPECTED_APIS = {
    0: (0, 11), 1: (4, 12), 2: (1, 7), 3: (0, 12), 8: (2, 9), 9: (1, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 4), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 29: (0, 3), 30: (0, 3), 31: (0, 3), 32: (1, 4), 33: (0, 2), 35: (1, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 44: (0, 1),
    47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1),
}


def call(broker: BrokerProcess, api_key: int, version: int, body: Any) -> Any:
    return call_once(broker.port, api_key, version, body)


@pytest.fixture
def admin(broker: BrokerProcess):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_api_versions_advertises_exactly_what_is_implemented(broker: BrokerProcess) -> None:
    resp = call(broker, 18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert resp.error_code == 0 and resp.throttle_time_ms == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == EXPECTED_APIS
    assert [k.api_key for k in resp.api_keys] == sorted(EXPECTED_APIS)
    # KIP-511: software name/version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    bad = call(broker, 18, 3, ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"))
    assert bad.error_code == 42  # INVALID_REQUEST


def test_metadata_field_by_field(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("meta", 3, 1)])
    resp = call(broker, 3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="meta"),
                                                        mr.MetadataRequestTopic(name="absent")],
                                                allow_auto_topic_creation=False))
    assert [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers] == [(0, "127.0.0.1", broker.port, None)]
    assert resp.controller_id == 0 and len(resp.cluster_id) == 22
    meta, absent = resp.topics
    assert (meta.error_code, meta.name, meta.is_internal) == (0, "meta", False)
    assert meta.topic_id.int != 0
    assert meta.topic_authorized_operations == -2147483648
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas,
             p.error_code) for p in meta.partitions] == [(i, 0, 0, [0], [0], [], 0) for i in range(3)]
    assert (absent.error_code, absent.name, absent.partitions) == (3, "absent", [])  # UNKNOWN_TOPIC_OR_PARTITION
    # v0: empty list = all topics; v1+: null = all, empty = none
    assert [t.name for t in call(broker, 3, 0, MetadataRequest(topics=[])).topics] == ["meta"]
    assert call(broker, 3, 1, MetadataRequest(topics=[])).topics == []
    assert [t.name for t in call(broker, 3, 1, MetadataRequest(topics=None)).topics] == ["meta"]
    # lookup by topic id (v12) and an invalid name
    by_id = call(broker, 3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(topic_id=meta.topic_id, name=None)]))
    assert by_id.topics[0].name == "meta"
    bad = call(broker, 3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="bad/name")], allow_auto_topic_creation=True))
    assert bad.topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    # auto-creation
    auto = call(broker, 3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True))
    assert auto.topics[0].error_code == 0 and len(auto.topics[0].partitions) == 1


def test_topic_lifecycle_and_configs(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("life", 2, 1, topic_configs={"cleanup.policy": "delete", "retention.ms": "60000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("life", 2, 1)])
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics([NewTopic("badcfg", 1, 1, topic_configs={"no.such.config": "1"})])
    assert "life" in admin.list_topics() and "badcfg" not in admin.list_topics()

    admin.create_partitions({"life": NewPartitions(4)})
    desc = admin.describe_topics(["life"])
    assert len(desc[0]["partitions"]) == 4

    res = ConfigResource(ConfigResourceType.TOPIC, "life")
    cfg = admin.describe_configs([res], config_filter="all")["topic"]["life"]
    assert cfg["retention.ms"]["value"] == "60000"
    assert cfg["segment.bytes"]["value"] == "1073741824"
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "life", configs={"retention.ms": ("SET", "120000")})],
                        incremental=True)
    cfg = admin.describe_configs([res], config_filter="all")["topic"]["life"]
    assert cfg["retention.ms"]["value"] == "120000"

    admin.delete_topics(["life"])
    assert "life" not in admin.list_topics()
    # the partition directories are renamed <tp>.<uuid>-delete at once and removed
    # log.segment.delete.delay.ms later (Kafka's asyncDelete)
    assert not any(p.name.startswith("life-") and not p.name.endswith("-delete") for p in broker.log_dir.iterdir())
    assert any(p.name.startswith("life-") and p.name.endswith("-delete") for p in broker.log_dir.iterdir())


def test_delete_records_moves_log_start_offset(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("trim", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(50):
        producer.send("trim", str(i).encode(), partition=0)
    producer.flush()
    producer.close()
    resp = call(broker, 21, 2, DeleteRecordsRequest(topics=[drr.DeleteRecordsTopic(
        name="trim", partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=20)])], timeout_ms=1000))
    assert (resp.topics[0].partitions[0].error_code, resp.topics[0].partitions[0].low_watermark) == (0, 20)
    too_far = call(broker, 21, 2, DeleteRecordsRequest(topics=[drr.DeleteRecordsTopic(
        name="trim", partitions=[drr.DeleteRecordsPartition(partition_index=0, offset=999)])], timeout_ms=1000))
    assert too_far.topics[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000)
    tp = TopicPartition("trim", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    assert [int(m.value) for m in consumer] == list(range(20, 50))
    consumer.close()


def test_offset_for_leader_epoch_and_log_dirs(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("epochs", 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for _i in range(10):
        producer.send("epochs", b"x", partition=0)
    producer.flush()
    producer.close()
    resp = call(broker, 23, 4, OffsetForLeaderEpochRequest(replica_id=-1, topics=[ofl.OffsetForLeaderTopic(
        topic="epochs", partitions=[ofl.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)])]))
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 10)
    fenced = call(broker, 23, 4, OffsetForLeaderEpochRequest(replica_id=-1, topics=[ofl.OffsetForLeaderTopic(
        topic="epochs", partitions=[ofl.OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=0)])]))
    assert fenced.topics[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH
    dirs = call(broker, 35, 4, DescribeLogDirsRequest(topics=None))
    assert len(dirs.results) == 1 and dirs.results[0].error_code == 0
    sizes = {(t.name, p.partition_index): p.partition_size for t in dirs.results[0].topics for p in t.partitions}
    assert sizes[("epochs", 0)] > 0
    assert dirs.results[0].total_bytes > dirs.results[0].usable_bytes > 0
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 0 and [b["broker_id"] for b in cluster["brokers"]] == [0]


def test_topic_names_colliding_on_dot_and_underscore_are_refused(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    """Kafka's Topic.hasCollision: '.' and '_' are the same character in metric names, so
    `foo_bar` cannot exist beside `foo.bar` -- neither created nor auto-created (issue #12 §5)."""
    from protocol.messages import CreateTopicsRequest
    from protocol.messages import create_topics_request as ctr

    admin.create_topics([NewTopic("foo.bar", 1, 1)])
    resp = call(broker, 19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
        ctr.CreatableTopic(name="foo_bar", num_partitions=1, replication_factor=1, configs=[])]))
    t = resp.topics[0]
    assert (t.name, t.error_code) == ("foo_bar", 17)  # INVALID_TOPIC_EXCEPTION
    assert t.error_message == "Topic 'foo_bar' collides with existing topic: foo.bar"
    # auto-creation by Metadata is refused the same way: the name is never created
    meta = call(broker, 3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="foo_bar")],
                                               allow_auto_topic_creation=True))
    assert meta.topics[0].error_code != 0
    names = {t.name for t in call(broker, 3, 12, MetadataRequest(topics=None)).topics}
    assert "foo.bar" in names and "foo_bar" not in names

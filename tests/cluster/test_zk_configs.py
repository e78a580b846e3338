"""Config overrides in ZooKeeper mode (issue #14), with a real ZooKeeper and `odradek serve`
brokers: what Kafka 3.9's ZkConfigManager gives its brokers. A topic's override altered through a
broker that does not host it is described the same by every broker and applied by the one that
does (max.message.bytes refuses a produce, segment.bytes rolls segments); overrides written while
a broker is down (znodes without a notification, as after Kafka purged it) are applied when it
starts; a cluster-wide dynamic broker config (`<default>`) and a per-broker one reach the brokers
they concern, with Kafka's sources, and become the log defaults (log.retention.ms deletes
segments). The shipped ZooKeeper-cluster examples in config/ and Kafka 3.9's own
server.properties start brokers that register, with no unknown key.

Every wait is on an event (a broker's log line, a response), bounded."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from controller.zk.data import ConfigEntityZNode
from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.messages import describe_configs_request as dcq
from protocol.messages import incremental_alter_configs_request as iacq
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import REPO, BrokerProcess
from tests.raw_client import RawConnection

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

CHROOT = "/odradek"
WAIT = 20.0
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG = 1, 2, 3, 4
OVERRIDE_LINE = "Processing override for entityPath: "
KAFKA_3_9_SERVER_PROPERTIES = Path(__file__).parent / "kafka-3.9-server.properties"



def describe(b: BrokerProcess, resource_type: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    """DescribeConfigs v4 (with synonyms): {key: (value, source, [(synonym, value, source)])}."""
    with RawConnection(b.port) as conn:
        resp = conn.call(32, 4, DescribeConfigsRequest(
            resources=[dcq.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                   configuration_keys=keys)],
            include_synonyms=True, include_documentation=False))
    result = resp.results[0]
    assert result.error_code == 0, (result.error_code, result.error_message)
    return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def alter(b: BrokerProcess, resource_type: int, name: str, configs: dict[str, str | None]) -> int:
    """IncrementalAlterConfigs v1: SET each key with a value, DELETE each with None."""
    with RawConnection(b.port) as conn:
        resp = conn.call(44, 1, IncrementalAlterConfigsRequest(resources=[iacq.AlterConfigsResource(
            resource_type=resource_type, resource_name=name,
            configs=[iacq.AlterableConfig(name=k, config_operation=SET if v is not None else DELETE, value=v)
                     for k, v in configs.items()])], validate_only=False))
    return resp.responses[0].error_code


def produce(b: BrokerProcess, topic: str, value: bytes) -> int:
    """One record to partition 0 (acks=1); the partition's error code."""
    req = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pr.TopicProduceData(
        name=topic, partition_data=[pr.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])])
    with RawConnection(b.port) as conn:
        return conn.call(0, 9, req).responses[0].partition_responses[0].error_code


def leader_everywhere(brokers: list[BrokerProcess], topic: str) -> int:
    """Partition 0's leader once every broker's metadata names the same live one (bounded)."""
    deadline = time.monotonic() + WAIT
    while True:
        leaders = set()
        for b in brokers:
            with RawConnection(b.port) as conn:
                meta = conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
            leaders |= {p.leader_id for t in meta.topics if t.name == topic for p in t.partitions
                        if p.partition_index == 0} or {-1}
        if len(leaders) == 1 and -1 not in leaders:
            return leaders.pop()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the leader of {topic}-0 as the brokers see it: {leaders}")
        time.sleep(0.05)


def create_topic(b: BrokerProcess, topic: NewTopic) -> None:
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([topic])
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(topic.name, 0)], result
    finally:
        admin.close()


def by_id(brokers: list[BrokerProcess], broker_id: int) -> BrokerProcess:
    return next(b for b in brokers if f"broker.id={broker_id}" in b.overrides)


# --- topic overrides --------------------------------------------------------------------------------


def test_a_topic_override_altered_through_another_broker_is_applied_where_the_topic_lives(zookeeper, start_broker):
    connect = zookeeper.connect_string(CHROOT)
    brokers = [start_broker(i, connect) for i in (1, 2, 3)]
    create_topic(brokers[0], NewTopic("cfg", 1, 1, topic_configs={"retention.ms": "86400000"}))
    leader = by_id(brokers, leader_everywhere(brokers, "cfg"))
    other = next(b for b in brokers if b is not leader)
    assert produce(leader, "cfg", b"x" * 400) == 0  # the default max.message.bytes (1 MB)

    marks = [len(b.lines) for b in brokers]
    # one key set through a broker that does not host the topic: the others stay (the broker
    # starts from ZooKeeper's overrides, not from a metadata view without them)
    assert alter(other, TOPIC, "cfg", {"max.message.bytes": "300", "segment.bytes": "500"}) == 0
    for b, mark in zip(brokers, marks, strict=True):  # every broker processes the notification
        line = b.wait_for_line(OVERRIDE_LINE + "topics/cfg with config: ", timeout=WAIT, after=mark)
        assert line.endswith("with config: HashMap(retention.ms -> 86400000, max.message.bytes -> 300, "
                             "segment.bytes -> 500)'"), line
    for b in brokers:
        configs = describe(b, TOPIC, "cfg", ["retention.ms", "max.message.bytes", "segment.bytes", "cleanup.policy"])
        assert {k: v[:2] for k, v in configs.items()} == {
            "retention.ms": ("86400000", DYNAMIC_TOPIC_CONFIG),
            "max.message.bytes": ("300", DYNAMIC_TOPIC_CONFIG),
            "segment.bytes": ("500", DYNAMIC_TOPIC_CONFIG),
            "cleanup.policy": ("delete", 5),
        }, b.port
        assert configs["max.message.bytes"][2] == [("max.message.bytes", "300", DYNAMIC_TOPIC_CONFIG),
                                                   ("message.max.bytes", "1048588", 5)]

    # the hosting broker's log runs with them: a batch over 300 bytes is refused, and segments
    # roll at 500 bytes (offset 0 holds a 470-byte batch, the next ones are 170 bytes)
    mark = len(leader.lines)
    assert produce(leader, "cfg", b"x" * 400) == ErrorCode.MESSAGE_TOO_LARGE
    for _ in range(3):
        assert produce(leader, "cfg", b"y" * 100) == 0
    leader.wait_for_line("Rolled new log segment of cfg-0 at offset 1", timeout=WAIT, after=mark)
    leader.wait_for_line("Rolled new log segment of cfg-0 at offset 3", timeout=WAIT, after=mark)

    # DELETE through a third broker: back to the default everywhere, and on the log
    marks = [len(b.lines) for b in brokers]
    assert alter(brokers[0] if brokers[0] is not leader else brokers[2], TOPIC, "cfg",
                 {"max.message.bytes": None}) == 0
    for b, mark in zip(brokers, marks, strict=True):
        b.wait_for_line(OVERRIDE_LINE + "topics/cfg with config: HashMap(retention.ms -> 86400000, "
                        "segment.bytes -> 500)", timeout=WAIT, after=mark)
        assert describe(b, TOPIC, "cfg", ["max.message.bytes"])["max.message.bytes"][:2] == ("1048588", 5)
    assert produce(leader, "cfg", b"x" * 400) == 0


def test_overrides_written_while_a_broker_is_down_apply_when_it_starts(zookeeper, start_broker, tmp_path):
    """Znodes written without a change notification (as a notification Kafka purged after 15
    minutes): the broker reads every /config/topics and /config/brokers override at start."""
    connect = zookeeper.connect_string(CHROOT)
    fast = "zookeeper.session.timeout.ms=2000"
    b1, b2 = start_broker(1, connect, fast), start_broker(2, connect, fast)
    create_topic(b1, NewTopic("down", -1, -1, replica_assignments={0: [2]}))
    assert leader_everywhere([b1, b2], "down") == 2
    b2.kill()  # its session expires: the controller marks the partition offline

    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=10)
    try:
        zk.set(ConfigEntityZNode.path("topics", "down"), ConfigEntityZNode.encode({"segment.bytes": "300"}))
        zk.create(ConfigEntityZNode.path("brokers", "<default>"),
                  ConfigEntityZNode.encode({"message.max.bytes": "300", "log.retention.ms": "3600000"}))
        assert zk.get_children("/config/changes") == []  # nothing announces them
    finally:
        zk.stop()
        zk.close()

    deadline = time.monotonic() + WAIT  # its old registration must be gone before it registers again
    while True:
        with RawConnection(b1.port) as conn:
            live = {b.node_id for b in conn.call(3, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False)).brokers}
        if live == {1}:
            break
        assert time.monotonic() < deadline, live
        time.sleep(0.1)
    b2 = start_broker(2, connect, fast, log_dir=tmp_path / "broker-2")
    assert leader_everywhere([b1, b2], "down") == 2
    configs = describe(b2, BROKER, "2", ["message.max.bytes", "log.retention.ms"])
    assert {k: v[:2] for k, v in configs.items()} == {
        "message.max.bytes": ("300", DYNAMIC_DEFAULT_BROKER_CONFIG),
        "log.retention.ms": ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
    }
    assert configs["message.max.bytes"][2] == [("message.max.bytes", "300", DYNAMIC_DEFAULT_BROKER_CONFIG),
                                               ("message.max.bytes", "1048588", 5)]
    topic = describe(b2, TOPIC, "down", ["segment.bytes", "max.message.bytes", "retention.ms"])
    assert {k: v[:2] for k, v in topic.items()} == {
        "segment.bytes": ("300", DYNAMIC_TOPIC_CONFIG),
        "max.message.bytes": ("300", DYNAMIC_DEFAULT_BROKER_CONFIG),
        "retention.ms": ("3600000", DYNAMIC_DEFAULT_BROKER_CONFIG),
    }
    # the log it leads again: the cluster default's max.message.bytes, its own segment.bytes
    assert produce(b2, "down", b"x" * 400) == ErrorCode.MESSAGE_TOO_LARGE
    mark = len(b2.lines)
    for _ in range(2):
        assert produce(b2, "down", b"y" * 100) == 0
    b2.wait_for_line("Rolled new log segment of down-0 at offset 1", timeout=WAIT, after=mark)


# --- dynamic broker configs -------------------------------------------------------------------------


def test_a_cluster_default_broker_config_reaches_every_broker_and_becomes_the_log_default(zookeeper, start_broker):
    connect = zookeeper.connect_string(CHROOT)
    brokers = [start_broker(i, connect, "log.retention.check.interval.ms=200", "log.segment.delete.delay.ms=0")
               for i in (1, 2)]
    create_topic(brokers[0], NewTopic("ret", 1, 1, topic_configs={"segment.bytes": "300"}))
    leader_id = leader_everywhere(brokers, "ret")
    leader = by_id(brokers, leader_id)
    other = next(b for b in brokers if b is not leader)
    other_id = 3 - leader_id
    for _ in range(4):  # a segment per record: three can go
        assert produce(leader, "ret", b"y" * 100) == 0

    # the cluster default (resource ""), through the broker that does not host the topic
    marks = [len(b.lines) for b in brokers]
    assert alter(other, BROKER, "", {"log.retention.ms": "100"}) == 0
    for b, mark in zip(brokers, marks, strict=True):
        b.wait_for_line(OVERRIDE_LINE + "brokers/<default> with config: HashMap(log.retention.ms -> 100)",
                        timeout=WAIT, after=mark)
    leader.wait_for_line("Deleting segments of ret-0 due to retention time 100ms breach", timeout=WAIT,
                         after=marks[brokers.index(leader)])
    synonyms = [("log.retention.ms", "100", DYNAMIC_DEFAULT_BROKER_CONFIG), ("log.retention.hours", "168", 5)]
    for b, broker_id in ((leader, leader_id), (other, other_id)):
        assert describe(b, BROKER, str(broker_id), ["log.retention.ms"])["log.retention.ms"] == (
            "100", DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms)
        # the cluster default alone, as Kafka describes the resource ""
        assert describe(b, BROKER, "") == {"log.retention.ms": ("100", DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms[:1])}
        assert describe(b, TOPIC, "ret", ["retention.ms"])["retention.ms"][:2] == ("100", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # one broker's own values win over the cluster default there, and only there (they are set
    # through that broker, as Kafka requires)
    assert produce(leader, "ret", b"x" * 200) == 0  # a 270-byte batch
    marks = [len(b.lines) for b in brokers]
    assert alter(leader, BROKER, str(leader_id), {"log.retention.ms": "3600000", "message.max.bytes": "250"}) == 0
    for b, mark in zip(brokers, marks, strict=True):
        b.wait_for_line(OVERRIDE_LINE + f"brokers/{leader_id} with config: HashMap(log.retention.ms -> 3600000, "
                        "message.max.bytes -> 250)", timeout=WAIT, after=mark)
    mine = describe(leader, BROKER, str(leader_id), ["log.retention.ms", "message.max.bytes"])
    assert mine["log.retention.ms"] == ("3600000", DYNAMIC_BROKER_CONFIG,
                                        [("log.retention.ms", "3600000", DYNAMIC_BROKER_CONFIG), *synonyms])
    assert mine["message.max.bytes"][:2] == ("250", DYNAMIC_BROKER_CONFIG)
    theirs = describe(other, BROKER, str(other_id), ["log.retention.ms", "message.max.bytes"])
    assert {k: v[:2] for k, v in theirs.items()} == {
        "log.retention.ms": ("100", DYNAMIC_DEFAULT_BROKER_CONFIG), "message.max.bytes": ("1048588", 5)}
    assert describe(leader, TOPIC, "ret", ["retention.ms"])["retention.ms"][:2] == ("3600000", DYNAMIC_BROKER_CONFIG)
    assert produce(leader, "ret", b"x" * 200) == ErrorCode.MESSAGE_TOO_LARGE


# --- the config/ examples and Kafka's own server.properties -----------------------------------------


def test_the_zookeeper_examples_and_kafkas_server_properties_start_registered_brokers(zookeeper, tmp_path):
    """config/server-zk-{1,2,3}.properties and Kafka 3.9's config/server.properties as shipped
    (its zookeeper.connect pointed at the test's ZooKeeper, listeners and log dirs by flag, which
    win over the file as documented), no key unknown."""
    connect = zookeeper.connect_string(CHROOT)
    files = [REPO / "config" / f"server-zk-{i}.properties" for i in (1, 2, 3)] + [KAFKA_3_9_SERVER_PROPERTIES]
    brokers = [BrokerProcess(tmp_path / f"b{n}", overrides=[f"@{f}", f"zookeeper.connect={connect}"])
               for n, f in enumerate(files)]
    try:
        for b in brokers:
            b.start()
        for broker_id, b in zip((1, 2, 3, 0), brokers, strict=True):
            assert "Unknown configuration" not in b.log_text(), b.log_text()
            b.wait_for_line(f"Registered broker {broker_id} at path /brokers/ids/{broker_id} with addresses: "
                            f"PLAINTEXT://127.0.0.1:{b.port}", timeout=1)
        kafka = describe(brokers[3], BROKER, "0", ["zookeeper.connection.timeout.ms", "log.retention.hours",
                                                   "num.partitions", "group.initial.rebalance.delay.ms"])
        assert {k: v[:2] for k, v in kafka.items()} == {
            "zookeeper.connection.timeout.ms": ("18000", STATIC_BROKER_CONFIG),
            "log.retention.hours": ("168", STATIC_BROKER_CONFIG),
            "num.partitions": ("1", STATIC_BROKER_CONFIG),
            "group.initial.rebalance.delay.ms": ("0", STATIC_BROKER_CONFIG),
        }
        deadline = time.monotonic() + WAIT  # one cluster: every broker's metadata has all four
        while True:
            with RawConnection(brokers[0].port) as conn:
                live = sorted(b.node_id for b in conn.call(3, 12, MetadataRequest(
                    topics=[], allow_auto_topic_creation=False)).brokers)
            if live == [0, 1, 2, 3] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert live == [0, 1, 2, 3]
    finally:
        for b in brokers:
            b.stop()

